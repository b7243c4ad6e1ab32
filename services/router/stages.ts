/**
 * A request's stages: an accepted request runs through one request machine (route → light →
 * judge → heavy) whose actors are bound to NATS (`adapters.ts`), on the router's clock; what ended
 * it is logged and counted, and it becomes the reply.
 */
import { toPromise } from "xstate";
import type { HadisError } from "../../contracts/errors.ts";
import type { GenerateReply, GenerationOptions, Quality } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import { createRequestActor, RequestMachine, type RequestClock } from "../../actors/request/request-machine.ts";
import { requestDeadlines, type ArtifactDrops } from "../../actors/request/deadlines.ts";
import { buildPreview, buildReply } from "../../actors/request/reply.ts";
import { progressBetween, splitAtHeavy, type Progress, type ProgressView } from "../../actors/request/progress.ts";
import { NO_TIME_TO_JUDGE, type PreviewEvent } from "../../actors/request/types.ts";
import type { DifficultyScorer, HardnessThreshold } from "../../actors/routing/difficulty.ts";
import type { ModelRanges } from "../../actors/routing/generation-options.ts";
import { isDeadlineAware } from "../../actors/routing/deadline-aware.ts";
import { throttled, type Logger } from "../telemetry/log.ts";
import { recordEscalationSkipped, recordJudgeFailure, recordLightFallback } from "../telemetry/metrics.ts";
import type { NatsConnection } from "../nats/connection.ts";
import type { PlanView } from "../nats/plan-view.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import { routerActors } from "./adapters.ts";
import type { RequestTraces } from "./tracing.ts";
import type { RouterWork } from "./work.ts";

/** What a request's stages need. */
export interface StagesOptions {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  plans: PlanView;
  work: RouterWork;
  scorer: DifficultyScorer;
  threshold: HardnessThreshold;
  /** The artifact's router, used for HADIS and its ablations while the plan runs its `hadis` mechanism. */
  artifactScoring?: { scorer: DifficultyScorer; threshold: HardnessThreshold };
  /** The learned router, used while the plan in force is hadis-plus's (when no scorer was named). */
  learnedScoring?: { scorer: DifficultyScorer; threshold: HardnessThreshold };
  /** Hears each item queued, by model (the artifact's per-model load signal in the router's reports). */
  onEnqueued?: (model: string) => void;
  resultsSubject: string;
  judgeTimeoutMs: number;
  /** Light items ask their worker for its verdict (default true). */
  workerVerdicts?: boolean;
  rangesOf: (model: string) => ModelRanges;
  traces: RequestTraces;
  clock: RequestClock;
  log: Logger;
}

/** A request the intake accepted: checked, admitted, with its id, seed and deadline. */
export interface AcceptedRequest {
  requestId: string;
  prompt: string;
  seed: number;
  /** When the router received it, on the router's clock (ms). */
  receivedAtMs: number;
  deadlineMs: number;
  options?: GenerationOptions;
  quality?: Quality;
  /**
   * Under the artifact's drops: no light image served early as the deadline nears, and work that
   * carries 1.5 × SLO from the start instead of the request's deadline; hadis-plus's plans keep
   * their deadline-aware path, against the SLO (`requestDeadlines`).
   */
  artifactDrops?: ArtifactDrops;
  /** The caller asked to see the light image the judge rejects before the final one (`hooks.onPreview` hears it). */
  preview?: boolean;
}

/** What hears a request while it runs. */
export interface StageHooks {
  /** Each step of progress (a job publishes them). */
  onProgress?: (steps: Progress[]) => void;
  /** The preview, sent while the heavy model makes the final image (a request with `preview`, escalated). */
  onPreview?: (preview: GenerateReply) => void;
}

/** Runs accepted requests. */
export interface RequestStages {
  /** Runs `request` to its reply, or throws its typed error; `hooks` hear its progress and its preview. */
  run(request: AcceptedRequest, hooks?: StageHooks): Promise<GenerateReply>;
  /** Fails each request still running with `err` (at a stop whose grace ran out): each gets a typed error reply. */
  abandonAll(err: HadisError): void;
}

/** The router's request stages. */
export function createStages(o: StagesOptions): RequestStages {
  const { log, work } = o;
  const machine = RequestMachine.provide({
    actors: routerActors({
      nc: o.nc,
      subjects: o.subjects,
      queue: o.queue,
      pending: work.pending,
      results: work.results,
      afterEnqueue: work.afterEnqueue,
      plans: o.plans,
      scorer: o.scorer,
      threshold: o.threshold,
      resultsSubject: o.resultsSubject,
      judgeTimeoutMs: o.judgeTimeoutMs,
      ...(o.workerVerdicts === false ? { workerVerdicts: false } : {}),
      rangesOf: o.rangesOf,
      planWaitMs: 2_000,
      log,
      traces: o.traces,
      floor: work.floor,
      paths: work.paths,
      capacity: work.capacity,
      ...(o.artifactScoring ? { artifactScoring: o.artifactScoring } : {}),
      ...(o.learnedScoring ? { learnedScoring: o.learnedScoring } : {}),
      ...(o.onEnqueued ? { onEnqueued: o.onEnqueued } : {}),
    }),
  });
  // The least time the heavy model needs, for the escalation check: its fastest recent generation;
  // under hadis-plus's plans the path ahead (the batches queued before it, then its own).
  const floorMs = (model: string) => {
    const plan = o.plans.current;
    return plan && isDeadlineAware(plan.policy) ? work.paths.view(plan).stageMs(model) : work.floor.floorMs(model);
  };
  /** A judge outage fails every light request's verdict: one line a minute says so (the metric counts each). */
  const judgeFailed = throttled(log, "warn", "router.judge_failed");
  /** The abandon hook of each request running. */
  const running = new Set<(err: HadisError) => void>();

  return {
    async run(request, { onProgress, onPreview } = {}) {
      const { requestId, seed, receivedAtMs, deadlineMs } = request;
      const asked = { ...(request.options ? { options: request.options } : {}), ...(request.quality ? { quality: request.quality } : {}) };
      const plan = o.plans.current;
      const deadlines = requestDeadlines({
        receivedAtMs,
        deadlineMs,
        floorMs,
        ...(request.artifactDrops ? { drops: request.artifactDrops } : {}),
        deadlineAware: plan !== null && isDeadlineAware(plan.policy),
      });
      const actor = createRequestActor(machine, o.clock, {
        requestId,
        prompt: request.prompt,
        seed,
        receivedAtMs,
        ...deadlines,
        ...asked,
        ...(request.preview && onPreview ? { preview: true } : {}),
      });
      const outcome = toPromise(actor);
      // The machine emits its preview inside the transition that escalates; it is sent with that
      // transition's snapshot, after the verdict and before the heavy stage starts (a job's events).
      let preview: PreviewEvent | undefined;
      if (request.preview && onPreview) actor.on("preview", (event) => void (preview = event));
      if (onProgress || (request.preview && onPreview)) {
        let before: ProgressView | undefined;
        actor.subscribe((snapshot) => {
          const steps = onProgress ? progressBetween(before, snapshot) : [];
          before = snapshot;
          const [early, late] = preview ? splitAtHeavy(steps) : [steps, []];
          if (early.length > 0) onProgress!(early);
          if (preview) onPreview!(buildPreview(preview, requestId, seed));
          preview = undefined;
          if (late.length > 0) onProgress!(late);
        });
      }
      actor.start();
      // One abandon hook per request, dropped when it ends (a race against one shared promise
      // that never settles kept every reply, image included, for as long as the router ran).
      let abandon!: (err: HadisError) => void;
      const abandoned = new Promise<never>((_, reject) => (abandon = reject));
      running.add(abandon);
      try {
        const ended = await Promise.race([outcome, abandoned]);
        if (!ended.ok && ended.state === "expired") {
          // A missed SLO explained in one line: the stage it was in, the stages that ended (their times), the plan.
          const d = ended.decision;
          log.warn("router.expired", {
            requestId,
            deadlineMs,
            stage: ended.stage,
            hard: d?.hard,
            pair: d ? `${d.pair.light}→${d.pair.heavy}` : null,
            planEpoch: d?.planEpoch,
            timings: ended.timings,
            ...(ended.heavyError !== undefined ? { heavyError: ended.heavyError } : {}),
          });
        }
        if (ended.ok && ended.escalationSkipped) recordEscalationSkipped();
        // (A request with no time left to judge did not ask the judge: not a failure of it.)
        if (ended.ok && ended.judgeError !== undefined && ended.judgeError !== NO_TIME_TO_JUDGE) {
          recordJudgeFailure();
          judgeFailed({ requestId, error: ended.judgeError });
        }
        if (ended.ok && ended.heavyError !== undefined) {
          const sentBy = ended.judge ? "judge" : "router";
          recordLightFallback(sentBy);
          log.warn("router.light_fallback", {
            requestId,
            sentBy,
            plannedHeavy: ended.decision.pair.heavy,
            error: ended.heavyError,
            servedBy: ended.image.model,
          });
        }
        return buildReply(ended, requestId, seed);
      } finally {
        running.delete(abandon);
        actor.stop(); // abandoned: its queued work is removed (a finished actor is already stopped)
      }
    },
    abandonAll(err) {
      for (const abandon of running) abandon(err);
    },
  };
}
