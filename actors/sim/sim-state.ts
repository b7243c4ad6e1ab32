/**
 * The simulator's shared state: the configuration read once, the clock, the agenda, the queues,
 * the workers, the plan in force and the counters of the result. `simulate` makes one per run;
 * the stage modules (`sim-workers`, `sim-requests`, `sim-arrivals`, `sim-plans`, `sim-control`)
 * are functions over it, so the run's time is `state.now`, passed in, never read from a clock.
 */
import type { Plan } from "../../contracts/messages.ts";
import { ControllerLedger } from "../artifact/ledger.ts";
import { allocationPeriodMs } from "../artifact/controller.ts";
import { NATIVE, has, type ArtifactMechanism } from "../artifact/mechanisms.ts";
import { admissionFactor, isHadisFamily, policyFor, tableOf } from "../artifact/policies.ts";
import { artifactExecMs, plannerView } from "../artifact/runtimes.ts";
import { fidSourceOf } from "../artifact/scoring.ts";
import { ARTIFACT_JUDGE_MS, ArtifactRouterThreshold } from "../artifact/worker-rules.ts";
import { ArrivalRate } from "../control/arrivals.ts";
import { newControlState, type ControlState, type TickConfig } from "../control/reconcile.ts";
import type { PlannerPolicy } from "../planner/policies.ts";
import { QUEUE_SAFETY } from "../planner/snapshot.ts";
import { batchLatencyMs, type ProfileSet } from "../profile/profile-set.ts";
import { mulberry32 } from "../profile/stats.ts";
import { ReferenceFeatureScorer } from "../routing/difficulty.ts";
import { GenerationFloor } from "../routing/generation-floor.ts";
import { isDeadlineAware, stageEstimateMs } from "../routing/deadline-aware.ts";
import { EventQueue } from "./event-queue.ts";
import type { SimConfig, SimEvent, SimRequest, SimResult, SimWorker, Stage, WorkItem } from "./types.ts";

/** One run's state, shared by the simulator's stage modules; the fields marked mutable change as the run goes. */
export interface SimState {
  readonly config: SimConfig;
  readonly profiles: ProfileSet;
  readonly timeScale: number;
  readonly sloMs: number;
  /** Whether one of the artifact's mechanisms is on. */
  readonly on: (m: ArtifactMechanism) => boolean;
  /** The artifact's random dispatch to per-worker queues (else shared per-model queues). */
  readonly dispatch: boolean;
  /** The artifact's drop rule (2 × SLO deadline, drop what would finish late). */
  readonly drops: boolean;
  /** The artifact's worker-side judge (its latency in the batch, its verdict synchronous). */
  readonly workerJudge: boolean;
  /** The artifact's free, instant swaps. */
  readonly freeSwaps: boolean;
  /** The artifact's per-second controller allocates (else the manager's control tick). */
  readonly artifactControl: boolean;
  readonly tickMs: number;
  readonly statsEveryMs: number;
  readonly heartbeatEveryMs: number;
  readonly judgeLatencyMs: number;
  readonly policy: PlannerPolicy;
  /** The profiles as the planner sees them. */
  readonly planning: ProfileSet;
  readonly tick: TickConfig;
  readonly control: ControlState;
  readonly agenda: EventQueue<SimEvent>;
  readonly random: () => number;
  /** Shared per-model queues (our design), or under random dispatch the items no worker is listed for yet. */
  readonly queues: Map<string, WorkItem[]>;
  readonly workers: SimWorker[];
  /** Idle workers waiting on a model's queue, in the order they started waiting (pull order). */
  readonly waitingPulls: Map<string, SimWorker[]>;
  /** Mutable: the load balancer's routing table, workers listed per model (random dispatch). */
  routing: Map<string, SimWorker[]>;
  readonly result: SimResult;
  /** What the live router learns from results: each model's fastest recent generation. */
  readonly floor: GenerationFloor;
  /** Mutable: the plan in force. */
  plan: Plan | null;
  /** Mutable: the simulated clock, ms from the trace's start (negative during warm-up). */
  now: number;
  readonly ledger: ControllerLedger;
  /** Mutable: arrivals since the router's last stats report, and when it reported. */
  arrivalsSinceReport: number;
  lastReportMs: number;
  /** The manager's demand sample (live: services/resource-manager); one router here. */
  readonly arrivalRate: ArrivalRate;
  readonly routerSilentAfterMs: number;
  /** Mutable: requests not ended yet. */
  open: number;
  /** Mutable: requests the router holds (arrived, not answered): what its admission bound counts. */
  routerInFlight: number;
  /** The artifact's router scorer and threshold (HADIS-family policies under its `hadis` mechanism), else null. */
  readonly reference: ReferenceFeatureScorer | null;
  readonly artifactThreshold: ArtifactRouterThreshold | null;
  /** The policy's FID comes from its configuration (the artifact's scoring of config-FID policies). */
  readonly configSource: boolean;
  readonly worstFid: number;
  /** How long after arrival a request ends unanswered. */
  readonly giveUpAfterMs: number;
  /** The artifact's drop rule: the latest a batch may finish, from arrival. */
  readonly startLimitMs: number;
  /** hadis-plus decides per request from the path ahead (deadline-aware cascade). */
  readonly deadlineAware: boolean;
  /** hadis-plus's workers run the batch its tightest deadlines allow (`fittingBatchSize`). */
  readonly fitBatches: boolean;
  /** Mutable: the controller's seconds so far. */
  seconds: number;
  /** The artifact's allocation period, in controller seconds. */
  readonly allocateEvery: number;
}

/** The state of a run at its start (`warmupMs` before the trace's time 0): empty queues, idle workers, no plan. */
export function newSimState(config: SimConfig): SimState {
  const { profiles, timeScale, sloMs } = config;
  const fidelity = config.fidelity ?? NATIVE;
  const on = (m: ArtifactMechanism) => has(fidelity, m);
  const [dispatch, drops, workerJudge, freeSwaps, artifactControl] = [on("dispatch"), on("drops"), on("latency"), on("swaps"), on("tick")];
  const tickMs = config.tickMs ?? Math.max(500, 20_000 * timeScale);
  const statsEveryMs = config.statsEveryMs ?? 1_000;
  const warmupMs = config.warmupMs ?? (artifactControl ? 10_000 : 2 * tickMs);
  const policy = config.planner ?? policyFor(config.policyName, fidelity);
  const planning = plannerView(profiles, workerJudge, timeScale);
  const now = -warmupMs;
  // The artifact's router runs on HADIS-family light workers only (`is_lightweight`).
  const reference = on("hadis") && isHadisFamily(config.policyName) ? new ReferenceFeatureScorer(profiles) : null;
  return {
    config,
    profiles,
    timeScale,
    sloMs,
    on,
    dispatch,
    drops,
    workerJudge,
    freeSwaps,
    artifactControl,
    tickMs,
    statsEveryMs,
    heartbeatEveryMs: config.heartbeatEveryMs ?? 1_000,
    judgeLatencyMs: config.judgeLatencyMs ?? profiles.pool.judge.latencyMs * timeScale,
    policy,
    planning,
    tick: {
      policyName: config.policyName,
      policy,
      profiles: planning,
      solve: config.solve,
      sloMs,
      timeScale,
      queueSafety: config.queueSafety ?? QUEUE_SAFETY,
    },
    control: newControlState(config.demandHalfLifeMs ?? Math.max(1_000, 20_000 * timeScale)),
    agenda: new EventQueue<SimEvent>(),
    random: mulberry32(config.seed * 7_919 + 17),
    queues: new Map<string, WorkItem[]>(profiles.models.map((m) => [m.name, []])),
    workers: Array.from({ length: config.workers }, (_, i) => ({
      id: `w-${String(i).padStart(2, "0")}`,
      model: null,
      desired: null,
      batchSize: 1,
      busy: false,
      batch: [],
      batchModel: null,
      batchMs: 0,
      swaps: 0,
      unloading: null,
      reported: null,
      queue: [],
    })),
    waitingPulls: new Map<string, SimWorker[]>(profiles.models.map((m) => [m.name, []])),
    routing: new Map(),
    result: {
      records: [],
      plans: [],
      swaps: 0,
      loads: [],
      ticks: 0,
      expiredDrops: 0,
      wastedItems: 0,
      movedItems: 0,
      escalationsSkipped: 0,
      rescues: 0,
      batchesFitted: 0,
      lightFallbacks: 0,
      admissions: { cascade: 0, heavy: 0, light: 0 },
      leftInQueue: {},
      unfinished: 0,
      rows: [],
    },
    floor: new GenerationFloor(),
    plan: null,
    now,
    ledger: new ControllerLedger(
      profiles.models.map((m) => m.name),
      now,
    ),
    arrivalsSinceReport: 0,
    lastReportMs: now,
    arrivalRate: new ArrivalRate(),
    routerSilentAfterMs: Math.max(3_000, 3 * statsEveryMs),
    open: config.arrivals.length,
    routerInFlight: 0,
    reference,
    artifactThreshold: reference ? new ArtifactRouterThreshold(reference.referenceScores) : null,
    configSource: fidSourceOf(config.policyName) === "config",
    worstFid: Math.max(...tableOf(config.policyName, profiles).map((r) => r.fid)),
    giveUpAfterMs: drops ? 2 * sloMs : sloMs,
    startLimitMs: admissionFactor(config.policyName, fidelity) * sloMs,
    deadlineAware: config.deadlineAware ?? isDeadlineAware(config.policyName),
    fitBatches: config.fitBatches ?? config.deadlineAware ?? isDeadlineAware(config.policyName),
    seconds: 0,
    allocateEvery: Math.round(allocationPeriodMs(timeScale) / 1_000),
  };
}

/** Whether a plan runs a cascade (a light model judged, a heavy one to escalate to). */
export const isCascade = (p: Plan | null): boolean => p !== null && p.pair.light !== p.pair.heavy;

/** The reference score of the image `model` makes for the request's prompt. */
export const scoreOf = (s: SimState, model: string, req: SimRequest) => s.profiles.reference.scores.get(model)?.[req.refIndex];

/** The request's SLO deadline (its own deadline is 2 × SLO under the artifact's drops). */
export const sloDeadline = (s: SimState, req: SimRequest) => req.arrivalMs + s.sloMs;

/** Execution time of a batch of `n` on `model`: the profile's, or the artifact's table plus its judge. */
export const execMs = (s: SimState, model: string, n: number) =>
  s.workerJudge
    ? artifactExecMs(s.profiles.byName.get(model)!, n, s.timeScale) + ARTIFACT_JUDGE_MS
    : batchLatencyMs(s.profiles.byName.get(model)!, n, s.timeScale);

/** Execution time of a batch without the artifact's judge: what its drop rule checks. */
export const checkMs = (s: SimState, model: string, n: number) =>
  s.workerJudge
    ? artifactExecMs(s.profiles.byName.get(model)!, n, s.timeScale)
    : batchLatencyMs(s.profiles.byName.get(model)!, n, s.timeScale);

/** Items waiting per model now: shared queues, or the queues of each model's workers. */
export function queueDepth(s: SimState): Record<string, number> {
  const depth: Record<string, number> = {};
  for (const [m, q] of s.queues) depth[m] = q.length;
  if (s.dispatch) for (const w of s.workers) if (w.desired) depth[w.desired] = (depth[w.desired] ?? 0) + w.queue.length;
  return depth;
}

/** hadis-plus: how long a generation of `model` queued now would take (the batches ahead, then its own). */
export function estimateMs(s: SimState, model: string): number {
  const a = s.plan?.models[model];
  if (!a || a.workers === 0) return Number.POSITIVE_INFINITY;
  return stageEstimateMs(queueDepth(s)[model] ?? 0, a.workers, a.batchSize, execMs(s, model, a.batchSize));
}

/** hadis-plus: whether the heavy model has no backlog beyond one round of its batches. */
export function heavyHasRoom(s: SimState, model: string): boolean {
  const a = s.plan?.models[model];
  return a !== undefined && (queueDepth(s)[model] ?? 0) < a.workers * a.batchSize;
}

/**
 * The stage a model plays under the plan in force (the artifact's workers act by their level,
 * whatever the query came for): a cascade's models past its light one make final images; the
 * light model, or any model of a plan without cascade, makes light ones (judged when the plan
 * escalates any).
 */
export const roleOf = (s: SimState, model: string): Stage => (isCascade(s.plan) && model !== s.plan!.pair.light ? "heavy" : "light");
