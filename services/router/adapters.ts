/**
 * The router's real actors for the request machine: enqueue to a model's JetStream work queue
 * and wait for the worker's result on this router's inbox; ask the discriminator; route by plan.
 */
import { fromPromise } from "xstate";
import { fromWireError, HadisError, isWireError } from "../../contracts/errors.ts";
import { moveTarget, type PendingItem, type PendingWork } from "./pending.ts";
import { isKeyed, resultKey } from "../../actors/request/idempotent.ts";
import { enqueueError, queueEntry, rideOn, storedResult } from "./keyed-work.ts";
import { decode, encode, parseRaw } from "../../contracts/envelope.ts";
import { JudgeReplySchema, PROTOCOL_VERSION, Qualities, type Plan, type WorkItem } from "../../contracts/messages.ts";
import { Headers, type Subjects } from "../../contracts/subjects.ts";
import type { GenerateCall, GenerateOutcome, JudgeCall, JudgeOutcome, RouteCall, RouteDecision } from "../../actors/request/types.ts";
import { checkGenerationOptions, withQuality, type ModelRanges } from "../../actors/routing/generation-options.ts";
import { NO_TIME_TO_JUDGE, REPLY_MARGIN_MS } from "../../actors/request/types.ts";
import { decideRoute } from "../../actors/routing/route-policy.ts";
import { isHadisFamily, planMechanisms } from "../../actors/artifact/mechanisms.ts";
import type { DifficultyScorer, HardnessThreshold } from "../../actors/routing/difficulty.ts";
import type { Logger } from "../telemetry/log.ts";
import {
  ASK_AGAIN_MS,
  headerOf,
  mayAskAgain,
  requestAttempt,
  watchConnection,
  type KV,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
} from "../nats/connection.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import type { PlanView } from "../nats/plan-view.ts";
import { endWithError, messagingAttributes, SpanKind, spanClockMs } from "../telemetry/tracing.ts";
import type { GenerationFloor } from "../../actors/routing/generation-floor.ts";
import { admitRouted } from "../../actors/routing/deadline-aware.ts";
import type { PathEstimator } from "./path-estimate.ts";
import { recordAdmission } from "../telemetry/metrics.ts";
import type { RequestTraces } from "./tracing.ts";

/** What the router's actors need. */
export interface RouterActorDeps {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  pending: PendingWork;
  /** Results of keyed requests, written by workers. */
  results?: KV;
  /** Called once an item's publish is acknowledged (its sequence known). */
  afterEnqueue?: (entry: PendingItem) => void;
  plans: PlanView;
  scorer: DifficultyScorer;
  threshold: HardnessThreshold;
  resultsSubject: string;
  judgeTimeoutMs: number;
  /** Light items the machine will judge ask their worker for its verdict (default true); false: every verdict is the discriminator's. */
  workerVerdicts?: boolean;
  /** How long a request waits for the first plan before failing. */
  planWaitMs: number;
  log: Logger;
  /** Request traces: each actor opens its stage span under the request's root span. */
  traces?: RequestTraces;
  /** Learns each model's fastest recent generation (the request machine's escalation check). */
  floor?: GenerationFloor;
  /** hadis-plus's estimate of the path ahead (its admission); absent: no admission. */
  paths?: PathEstimator;
  /** The artifact's router (reference features, its percentile rule), for HADIS and its ablations under its `hadis` mechanism. */
  artifactScoring?: { scorer: DifficultyScorer; threshold: HardnessThreshold };
  /** The learned router, for hadis-plus's plans. */
  learnedScoring?: { scorer: DifficultyScorer; threshold: HardnessThreshold };
  /** Counts each item queued, by model (router stats). */
  onEnqueued?: (model: string) => void;
  /** The generation settings each model supports (its profile's `options`); absent: none, so settings are refused. */
  rangesOf?: (model: string) => ModelRanges;
  /** The refusal for work on a model no worker serves now (`capacityRefusal`), or null. */
  capacity?: (model: string, plan: Plan | null) => HadisError | null;
}

/**
 * Asks the judge, waiting `timeoutMs` at most. Sent only while connected (waiting for the
 * reconnect within that time), and sent again once reconnected when the connection drops before
 * the verdict comes (the request or its verdict is lost then; judging twice changes nothing),
 * or when "no responders" comes just after a reconnect.
 */
async function askJudge(
  nc: NatsConnection,
  subject: string,
  data: Uint8Array,
  timeoutMs: number,
  headers: MsgHdrs | undefined,
): Promise<Msg> {
  const end = Date.now() + timeoutMs;
  const link = watchConnection(nc);
  for (;;) {
    if (!link.connected && !(await link.untilConnected(end - Date.now()))) {
      throw new HadisError("judge_failed", `not connected to NATS: no verdict within ${timeoutMs} ms`);
    }
    const attempt = await requestAttempt(
      nc,
      subject,
      data,
      { timeout: Math.max(1, end - Date.now()), ...(headers ? { headers } : {}) },
      true,
    );
    if (attempt !== "dropped") {
      if ("msg" in attempt) return attempt.msg;
      // Just after a reconnect the discriminators may not be back yet (a restarted nats-server).
      if (!mayAskAgain(nc, attempt.err, end - Date.now())) throw attempt.err;
      await new Promise((r) => setTimeout(r, ASK_AGAIN_MS));
    } else if (Date.now() >= end) {
      throw new HadisError("judge_failed", `the connection to NATS dropped: no verdict within ${timeoutMs} ms`);
    }
  }
}

/** A uniformly random worker the plan gives `model` (the artifact's load balancer), or undefined when none. */
function workerLane(plan: Plan, model: string): { worker: string } | undefined {
  const ids = Object.entries(plan.assignment)
    .filter(([, m]) => m === model)
    .map(([id]) => id);
  return ids.length > 0 ? { worker: ids[Math.floor(Math.random() * ids.length)] } : undefined;
}

/** The route actor, the generate and judge actors bound to NATS. */
export function routerActors(deps: RouterActorDeps) {
  const route = fromPromise<RouteDecision, RouteCall>(async ({ input }) => {
    const stage = deps.traces?.stage(input.requestId, "route", SpanKind.INTERNAL);
    try {
      const plan = deps.plans.current ?? (await deps.plans.waitForPlan(deps.planWaitMs));
      if (!plan) throw new HadisError("no_capacity", "no plan in force yet: is the resource manager running?", { retryAfterMs: 1_000 });
      // The caller's settings, against the models of the plan routing goes by (the router checked
      // them at intake against the plan then in force, which may have changed since).
      if (input.options) checkGenerationOptions(input.options, input.quality, plan.pair, deps.rangesOf ?? ((name) => ({ name })));
      const artifactRouter =
        deps.artifactScoring && planMechanisms(plan).has("hadis") && isHadisFamily(plan.policy)
          ? deps.artifactScoring
          : plan.policy === "hadis-plus"
            ? (deps.learnedScoring ?? null)
            : null;
      const decision = withQuality(
        decideRoute(
          plan,
          input.prompt,
          input.requestId,
          artifactRouter?.scorer ?? deps.scorer,
          artifactRouter?.threshold ?? deps.threshold,
        ),
        input.quality,
      );
      const paths = deps.paths;
      const pinned = input.quality !== undefined && input.quality !== Qualities.auto;
      const admitted = paths ? admitRouted(plan, decision, input.leftMs, pinned, () => paths.view(plan)) : decision;
      if (admitted.admission) {
        const a = admitted.admission;
        recordAdmission(a.choice);
        stage?.setAttributes({
          "hadis.admission.choice": a.choice,
          "hadis.admission.left_ms": a.leftMs,
          "hadis.admission.light_ms": a.lightMs,
          "hadis.admission.judge_ms": a.judgeMs,
          "hadis.admission.heavy_ms": a.heavyMs,
        });
      }
      stage?.setAttributes({
        "hadis.route.hard": decision.hard,
        "hadis.difficulty": decision.difficulty,
        "hadis.router_threshold": decision.routerThreshold,
        "hadis.pair.light": decision.pair.light,
        "hadis.pair.heavy": decision.pair.heavy,
        "hadis.plan_epoch": decision.planEpoch,
        "hadis.skip_judge": decision.skipJudge,
      });
      stage?.end();
      return admitted;
    } catch (err) {
      if (stage) endWithError(stage, err);
      throw err;
    }
  });

  const generate = fromPromise<GenerateOutcome, GenerateCall>(async ({ input, signal }) => {
    // The decision may predate the plan in force (an escalation long after routing): work goes
    // to the model that plays this stage now if the decided one has lost its workers.
    const current = deps.plans.current;
    const model = (current && moveTarget(current, input.stage, input.model)) ?? input.model;
    // No worker to take it: said now, not at the deadline (an escalated request is served its light image).
    const refused = deps.capacity?.(model, current);
    if (refused) throw refused;
    const msgId = `${input.requestId}/${input.stage}/${model}`;
    const stage = deps.traces?.stage(input.requestId, `${input.stage} ${model}`, SpanKind.PRODUCER, {
      ...messagingAttributes({ type: "send", name: "publish", destination: deps.subjects.work(model), messageId: msgId }),
      "hadis.stage": input.stage,
      "hadis.model": model,
      "hadis.plan_epoch": input.planEpoch,
      ...(model !== input.model ? { "hadis.planned_model": input.model } : {}),
    });
    const item: WorkItem = {
      v: PROTOCOL_VERSION,
      requestId: input.requestId,
      stage: input.stage,
      prompt: input.prompt,
      seed: input.seed,
      model,
      replyTo: deps.resultsSubject,
      enqueuedAtMs: spanClockMs(), // after the stage span's start: the worker's queue span starts here
      deadlineAtMs: input.deadlineAtMs,
      planEpoch: input.planEpoch,
      ...(input.options ? { options: input.options } : {}),
      ...(input.wantsVerdict && deps.workerVerdicts !== false ? { wantsVerdict: true as const } : {}),
    };
    let cancel: () => void = () => {};
    let entry = { seq: 0 } as PendingItem;
    const result = new Promise<GenerateOutcome>((resolve, reject) => {
      const lane = current && planMechanisms(current).has("dispatch") ? workerLane(current, model) : undefined;
      const pending: PendingItem = {
        item,
        stage: input.stage,
        seq: 0,
        resolve,
        reject,
        ...(stage ? { span: stage } : {}),
        ...(lane ? { lane } : {}),
      };
      if (stage) {
        // The worker's queue and execute spans are children of this one and carry its worker,
        // batch size and times: the stage says only which model served (a moved item's differs).
        pending.resolve = (outcome: GenerateOutcome) => {
          stage.setAttribute("hadis.served_model", outcome.model);
          // Its `judge` span is the worker's then (a child of this one), and no judge call follows.
          if (outcome.verdict) stage.setAttribute("hadis.judged_on", "worker");
          stage.end();
          resolve(outcome);
        };
        pending.reject = (err: unknown) => {
          endWithError(stage, err);
          reject(err);
        };
      }
      entry = pending;
      cancel = deps.pending.wait(pending);
      signal.addEventListener(
        "abort",
        () => {
          cancel();
          // The request is over: its queued item (if still there) must not cost a GPU or read as load.
          if (entry.seq && entry.own) void deps.queue.remove(entry.seq).catch(() => false);
          pending.reject(new HadisError("deadline_exceeded", "request ended"));
        },
        { once: true },
      );
    });
    // The request may end (deadline) while the publish is in flight: nobody awaits `result` then.
    result.catch(() => undefined);
    entry.settled = result;
    const keyed = isKeyed(input.requestId) && deps.results ? resultKey(input.requestId, input.stage) : null;
    try {
      const stored = keyed ? await storedResult(deps.results, keyed) : null;
      if (stored) {
        // A retry of a stage already answered (through any router, past JetStream's duplicate
        // window too): its stored image, delivered as read (it may expire a moment later), and no generation.
        deps.pending.deliver(stored);
      } else {
        const telemetry = deps.traces?.telemetry;
        const ack = await queueEntry({ ...deps, telemetry }, entry, msgId);
        entry.seq = ack.seq;
        entry.own = ack.own;
        if (signal.aborted) {
          // The request ended while the publish was in flight: its item must not cost a GPU.
          if (entry.own) void deps.queue.remove(ack.seq).catch(() => false);
          return result;
        }
        deps.onEnqueued?.(model);
        deps.afterEnqueue?.(entry);
        // A keyed request may be a retry of one queued through another router (its item was just
        // dropped as a duplicate): its result arrives in the results bucket, not on our inbox.
        // (Only then: each watch is a consumer the server keeps for minutes after it stops.)
        if (keyed && !entry.own) rideOn({ ...deps, telemetry }, entry, ack, msgId);
      }
    } catch (err) {
      cancel();
      if (stage) endWithError(stage, err);
      throw enqueueError(input.model, err);
    }
    const outcome = await result;
    deps.floor?.observe(outcome.model, outcome.execMs);
    if (outcome.verdict) deps.paths?.observeJudge(outcome.verdict.judgeMs);
    return outcome;
  });

  // The judge stage's span is the discriminator's (a child of the request's root span): one span
  // per hop is what tracing can afford at this request rate.
  const judge = fromPromise<JudgeOutcome, JudgeCall>(async ({ input }) => {
    const traced = deps.traces?.context(input.requestId);
    // Not waited for past the deadline: a judge that has not answered by then costs the verdict,
    // not the light image already made (the machine serves it when the judge fails).
    const askedAtMs = Date.now();
    const timeout = Math.min(deps.judgeTimeoutMs, input.deadlineAtMs - askedAtMs - REPLY_MARGIN_MS);
    if (timeout < 1) throw new HadisError("judge_failed", NO_TIME_TO_JUDGE);
    const reply = await askJudge(
      deps.nc,
      deps.subjects.judge,
      encode({
        v: PROTOCOL_VERSION,
        requestId: input.requestId,
        prompt: input.prompt,
        model: input.model,
        image: input.image,
        planEpoch: input.planEpoch,
        answerByMs: Date.now() + timeout,
      }),
      timeout,
      traced ? deps.traces!.telemetry.inject(traced) : undefined,
    );
    if (headerOf(reply.headers, Headers.serviceErrorCode)) {
      const body = parseRaw(reply.data);
      throw isWireError(body) ? fromWireError(body) : new HadisError("judge_failed", headerOf(reply.headers, Headers.serviceError));
    }
    const verdict = decode(JudgeReplySchema, reply.data, "judge reply");
    deps.paths?.observeJudge(Date.now() - askedAtMs);
    return { score: verdict.score, threshold: verdict.threshold, accept: verdict.accept };
  });

  return { route, generate, judge };
}
