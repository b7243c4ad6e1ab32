/** The simulator's inputs and outputs, and the shapes it moves around inside. */
import type { Plan } from "../../contracts/messages.ts";
import type { PlannerPolicy } from "../planner/policies.ts";
import type { Fidelity } from "../artifact/mechanisms.ts";
import type { LedgerRow } from "../artifact/ledger.ts";
import type { controlTick, TickOutcome } from "../control/reconcile.ts";
import type { ProfileJudge } from "../judge/profile-judge.ts";
import type { SolveFn } from "../planner/solver.ts";
import type { ProfileSet } from "../profile/profile-set.ts";
import type { Arrival } from "../profile/reference.ts";
import type { RouteDecision } from "../request/types.ts";
import type { DifficultyScorer, HardnessThreshold } from "../routing/difficulty.ts";
import type { PlanMark, RequestRecord } from "./scoring.ts";

/** Inputs of one simulated run. */
export interface SimConfig {
  policyName: string;
  profiles: ProfileSet;
  solve: SolveFn;
  /** The router's difficulty scorer and (fresh, stateful) threshold. */
  scorer: DifficultyScorer;
  threshold: HardnessThreshold;
  /** Profile judge; its latency option is ignored (`judgeLatencyMs` is used). */
  judge: Pick<ProfileJudge, "score" | "thresholdFor">;
  arrivals: readonly Arrival[];
  /** Prompt text by prompt index. */
  prompts: readonly string[];
  workers: number;
  /** Latency objective, ms (already time-scaled). */
  sloMs: number;
  timeScale: number;
  /** Seeds request ids (Proteus's random split hashes them) and the random dispatch. */
  seed: number;
  /** Which of the artifact's mechanisms are on (default: none, our design). */
  fidelity?: Fidelity;
  /** Control tick, ms (live default: max(500, 20 s × time scale)). */
  tickMs?: number;
  /** Demand EWMA half-life, ms (live default: max(1 s, 20 s × time scale)). */
  demandHalfLifeMs?: number;
  /** Little's-law safety factor (live: 1.5). */
  queueSafety?: number;
  /** Router stats interval, ms: the manager sees arrivals only when a router reports (live: 1 s). */
  statsEveryMs?: number;
  /**
   * Worker heartbeat interval, ms: the manager sees each worker's model as of its last heartbeat
   * (live: 1 s, every worker of a process at once). 0: it sees them as they are.
   */
  heartbeatEveryMs?: number;
  /** The system starts this long before the trace's time 0 (first tick 250 ms after start). */
  warmupMs?: number;
  /** Judge latency, ms (live: pool judge latency × time scale). */
  judgeLatencyMs?: number;
  /**
   * A request's queued items leave the queues when it ends (default true), as live: the router
   * removes an ended request's item from the stream, and the manager purges a model left without
   * workers. `false` replays the earlier behaviour, where such items stayed and read as load.
   */
  purgeFinished?: boolean;
  /**
   * The demand the planner is told instead of its estimate (the clairvoyant bound: the peak rate
   * the trace will bring over the coming window), qps at a time.
   */
  demandOracle?: (nowMs: number) => number;
  /**
   * hadis-plus's deadline-aware cascade on or off (default: on for hadis-plus and the clairvoyant
   * bound, off otherwise); the ablation bench turns it on and off apart from the policy.
   */
  deadlineAware?: boolean;
  /** hadis-plus's workers fit a batch to its tightest deadlines (default: with the deadline-aware cascade); the ablation bench apart. */
  fitBatches?: boolean;
  /** The planner to run instead of the named policy's (the ablation bench's variants of one policy). */
  planner?: PlannerPolicy;
  /** The manager's control tick (default `controlTick`); tests script plans with a fake. */
  control?: typeof controlTick;
  /** Called after every control tick (diagnostics), like the manager's `onTick`. */
  onTick?: (outcome: TickOutcome, nowMs: number) => void;
}

/** A plan adopted during the run. */
export interface SimPlanChange extends PlanMark {
  epoch: number;
  pair: Plan["pair"];
  routerThreshold: number;
  discThreshold: number;
  models: Plan["models"];
  degraded: number;
  swapped: number;
  demandQps: number;
  reason: string;
}

/** What a run produced. */
export interface SimResult {
  records: RequestRecord[];
  plans: SimPlanChange[];
  /** Completed worker swaps (a loaded model replaced by another). */
  swaps: number;
  /** Model loads completed, in order (a worker's first load, or the load of a swap). */
  loads: { atMs: number; workerId: string; model: string }[];
  ticks: number;
  /** Work items dropped by workers because their deadline had passed (or, under the artifact's drop rule, would pass). */
  expiredDrops: number;
  /** Items executed for requests already answered or expired (duplicates after a move, late items). */
  wastedItems: number;
  /** Items moved to another model's queue (or worker) by a plan change. */
  movedItems: number;
  /** Light images the judge rejected, served because the time left could not fit the heavy model (the live router's `GenerationFloor`). */
  escalationsSkipped: number;
  /** hadis-plus: prompts sent straight to the heavy model that turned to the light one, no heavy image come in time. */
  rescues: number;
  /** hadis-plus: batches a worker ran smaller than its batch size, its tightest deadlines not fitting the full one. */
  batchesFitted: number;
  /** Escalated requests served their light image as the deadline neared, the heavy image not come. */
  lightFallbacks: number;
  /** hadis-plus's admission choices (cascade, straight to heavy, light only). */
  admissions: { cascade: number; heavy: number; light: number };
  /** Items left in each model's queue when the run ended (stale work no worker pulled). */
  leftInQueue: Record<string, number>;
  /** Requests with no outcome when the agenda ran dry (recorded as dropped); 0 unless the simulator has a bug. */
  unfinished: number;
  /** The controller's per-second rows (what the artifact's scoring reads). */
  rows: LedgerRow[];
}

/** A stage of a request: light (judged) or heavy (final). */
export type Stage = "light" | "heavy";

/** One request as the simulator follows it. */
export interface SimRequest {
  index: number;
  id: string;
  arrivalMs: number;
  prompt: string;
  /** Reference prompt standing for it by text (scores reported for the served image). */
  refIndex: number;
  /** Its sequence number in the reference prompts (the trace's prompt index): what the artifact's workers read. */
  seqIndex: number;
  /** When the request ends unanswered: the SLO, or 2 × SLO under the artifact's drops. */
  deadlineAtMs: number;
  decision?: RouteDecision;
  /** The stage whose generation the router waits for (one outstanding generation per request). */
  waiting: Stage | null;
  /** The model of the item the router waits on (its pending entry's model; a move updates it). */
  waitingModel?: string;
  /** hadis-plus: a light item races the late heavy one (`rescueWithLight`). */
  racing?: boolean;
  /** Light image made (the model that made it). */
  lightModel?: string;
  /** hadis-plus admitted it to the light model only: a rejected image is served degraded. */
  lightOnly?: boolean;
  /** hadis-plus sent a hard prompt to the light model (the heavy could not answer in time): its image is degraded. */
  degraded?: boolean;
  ended: boolean;
  record?: RequestRecord;
}

/** One generation to run. */
export interface WorkItem {
  req: SimRequest;
  stage: Stage;
  model: string;
  deadlineAtMs: number;
}

/** One GPU worker. */
export interface SimWorker {
  id: string;
  model: string | null;
  desired: string | null;
  batchSize: number;
  /** Executing a batch or swapping. */
  busy: boolean;
  /** Items of the batch in execution. */
  batch: WorkItem[];
  /** The model running the batch. */
  batchModel: string | null;
  /** Execution time of that batch, ms. */
  batchMs: number;
  swaps: number;
  /** The model being unloaded (a live worker reports it until the unload ends). */
  unloading: string | null;
  /** The model its last heartbeat reported: what the manager sees. */
  reported: string | null;
  /** Its own queue (random dispatch). */
  queue: WorkItem[];
}

/** Events of the agenda. */
export type SimEvent =
  | { kind: "arrival"; req: SimRequest }
  | { kind: "deadline"; req: SimRequest }
  /** An escalated request's light image goes out this close to the deadline when the heavy one has not come (`REPLY_MARGIN_MS`). */
  | { kind: "lightBeforeDeadline"; req: SimRequest }
  /** hadis-plus: a prompt sent straight to the heavy model turns to the light one if no heavy image has come (`rescueAtMs`). */
  | { kind: "rescue"; req: SimRequest }
  | { kind: "judged"; req: SimRequest }
  | { kind: "batchDone"; worker: SimWorker }
  | { kind: "unloaded"; worker: SimWorker; from: string }
  | { kind: "loaded"; worker: SimWorker; from: string | null; to: string }
  | { kind: "stats" }
  | { kind: "beat" }
  | { kind: "tick" }
  /** The controller's once-a-second tick: its ledger, and under the artifact's `tick` its allocations. */
  | { kind: "second" }
  /** The load balancer rebuilds its routing tables (random dispatch). */
  | { kind: "routing" };
