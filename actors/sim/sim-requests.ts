/**
 * A request's life after admission, as the router's `RequestMachine` leads it: queued to the
 * model playing its stage, its light image judged, escalated to the heavy model or served, and
 * ended exactly once (served, timed out or dropped).
 */
import type { Route } from "../../contracts/messages.ts";
import { Routes } from "../../contracts/messages.ts";
import type { LedgerOutcome } from "../artifact/ledger.ts";
import { artifactQualified } from "../artifact/worker-rules.ts";
import { acceptsLight } from "../judge/verdict.ts";
import { REPLY_MARGIN_MS } from "../request/types.ts";
import { escalationFits } from "../routing/deadline-aware.ts";
import { moveTarget } from "../routing/move-target.ts";
import type { RequestRecord } from "./scoring.ts";
import { estimateMs, isCascade, roleOf, scoreOf, sloDeadline, type SimState } from "./sim-state.ts";
import { push } from "./sim-workers.ts";
import type { SimRequest, Stage, WorkItem } from "./types.ts";

/** Ends a request with its record, files the outcome with the controller's ledger, and removes its queued work. */
export function finish(s: SimState, req: SimRequest, record: Omit<RequestRecord, "arrivalMs">): void {
  // A request machine ends once; a second end would be a simulator bug, not an outcome.
  if (req.ended) throw new Error(`request ${req.id} ended twice (${req.record!.outcome}, then ${record.outcome})`);
  req.ended = true;
  req.waiting = null;
  req.record = { arrivalMs: req.arrivalMs, ...record };
  s.open--;
  s.routerInFlight--;
  const filed: LedgerOutcome =
    record.outcome === "dropped" ? "drop" : record.outcome === "timedOut" || (record.latencyMs ?? 0) > s.sloMs ? "timeout" : "succeed";
  s.ledger.end(req.index, s.now, filed, s.drops && record.outcome === "dropped");
  if (s.config.purgeFinished ?? true) {
    for (const [m, q] of s.queues)
      if (q.some((it) => it.req === req))
        s.queues.set(
          m,
          q.filter((it) => it.req !== req),
        );
    if (s.dispatch) for (const w of s.workers) if (w.queue.some((it) => it.req === req)) w.queue = w.queue.filter((it) => it.req !== req);
  }
}

/** Serves the image `model` made for the request, by `route` (the fallback that made it, if one did). */
export function serve(s: SimState, req: SimRequest, model: string, route: Route, fallback?: string): void {
  const models =
    route === Routes.light ? { light: model } : route === Routes.heavy ? { heavy: model } : { light: req.lightModel, heavy: model };
  finish(s, req, {
    latencyMs: s.now - req.arrivalMs,
    outcome: "served",
    route,
    models,
    servedModel: model,
    servedScore: scoreOf(s, model, req),
    ...(fallback ? { fallback } : {}),
  });
}

/** Queues work as the router's generate actor does: to the model playing the stage now if the decided one has no workers. */
export function enqueue(s: SimState, req: SimRequest, stage: Stage, decided: string): void {
  const model = playing(s, stage, decided);
  req.waiting = stage;
  req.waitingModel = model;
  s.ledger.arrival(model);
  push(s, { req, stage, model, deadlineAtMs: req.deadlineAtMs });
}

/** The model playing `stage` under the plan in force: the decided one, or the one its work moves to if it lost its workers. */
const playing = (s: SimState, stage: Stage, decided: string) => (s.plan && moveTarget(s.plan, stage, decided)) ?? decided;

/**
 * A worker's result reaches the router (PendingWork.deliver): the first result for the stage the
 * request waits on wins, whatever model made it (a moved copy not yet taken is removed); a late
 * copy of another stage's work is dropped. Under the artifact's per-worker queues kept through
 * swaps, the item is what the worker that ran it makes of it.
 */
export function deliver(s: SimState, item: WorkItem, ran: string, batchMs: number): void {
  const req = item.req;
  if (req.ended) return void s.result.wastedItems++;
  if (s.dispatch && s.freeSwaps) {
    item = { ...item, stage: roleOf(s, ran), model: ran };
    req.waiting = item.stage;
    req.waitingModel = ran;
  }
  if (req.racing && item.stage === "light" && req.waiting === "heavy") return serve(s, req, item.model, Routes.light, "degraded");
  if (req.waiting !== item.stage) return void s.result.wastedItems++;
  s.floor.observe(item.model, batchMs); // the live router learns from the results it takes
  const stage = req.waiting;
  req.waiting = null;
  if (item.model !== req.waitingModel) {
    // The original answered before its moved copy ran (PendingWork's onSuperseded): the copy
    // leaves its queue, unless a worker has taken it already.
    const copies = s.queues.get(req.waitingModel!);
    const at = copies ? copies.findIndex((x) => x.req === req && x.stage === stage) : -1;
    if (at >= 0) copies!.splice(at, 1);
  }
  if (stage === "heavy") return serve(s, req, item.model, req.lightModel ? Routes.lightThenHeavy : Routes.heavy);
  req.lightModel = item.model;
  const skip = s.dispatch && s.freeSwaps ? !isCascade(s.plan) || s.plan!.discThreshold <= 0 : req.decision!.skipJudge;
  if (skip) return serve(s, req, item.model, Routes.light, req.degraded ? "degraded" : undefined);
  if (s.workerJudge) return void judge(s, req); // synchronous: the worker's own verdict
  s.agenda.push(s.now + s.judgeLatencyMs, { kind: "judged", req });
}

/** The discriminator's verdict on a light image, then serve it or escalate it. */
export async function judge(s: SimState, req: SimRequest): Promise<void> {
  const { plan, profiles } = s;
  // The discriminator judges against the threshold of the plan in force now.
  const share = plan?.discThreshold ?? 0;
  let accept: boolean;
  if (s.workerJudge) {
    const scores = profiles.reference.scores.get(req.lightModel!)!;
    accept = artifactQualified(scores[req.seqIndex], profiles.reference.sortedScores.get(req.lightModel!)!, share);
  } else {
    const [score] = await s.config.judge.score([{ prompt: req.prompt, model: req.lightModel!, image: new Uint8Array(0) }]);
    accept = acceptsLight(score, s.config.judge.thresholdFor(req.lightModel!, share), share);
  }
  const heavy = s.dispatch && s.freeSwaps ? (isCascade(s.plan) ? s.plan!.pair.heavy : null) : req.decision!.pair.heavy;
  if (accept || heavy === null) serve(s, req, req.lightModel!, Routes.light);
  else if (s.deadlineAware && (req.lightOnly || !escalationFits(sloDeadline(s, req) - s.now, estimateMs(s, heavy)))) {
    // hadis-plus: the heavy model cannot remake it in time, so the light image goes out now, degraded.
    s.result.escalationsSkipped++;
    serve(s, req, req.lightModel!, Routes.light, "degraded");
  } else if (s.drops || s.deadlineAware || req.deadlineAtMs - s.now >= s.floor.floorMs(heavy)) {
    enqueue(s, req, "heavy", heavy);
    // Its light image goes out as the SLO nears (the artifact's drops have no such fallback; hadis-plus's path keeps it).
    if (!s.drops || s.deadlineAware)
      s.agenda.push(Math.max(s.now, sloDeadline(s, req) - REPLY_MARGIN_MS), { kind: "lightBeforeDeadline", req });
  } else {
    // The live router's escalation check: the heavy model cannot answer in the time left.
    s.result.escalationsSkipped++;
    serve(s, req, req.lightModel!, Routes.light);
  }
}

/**
 * hadis-plus: a prompt sent straight to the heavy model, its heavy image not come by the last
 * moment the light model can still answer, races it with the light model (as the router's request
 * machine does): the first image is served, the light one degraded; the other item is purged as
 * the request ends.
 */
export function rescueWithLight(s: SimState, req: SimRequest): void {
  if (req.ended || req.waiting !== "heavy" || req.lightModel !== undefined || req.racing) return;
  s.result.rescues++;
  req.racing = true;
  push(s, { req, stage: "light", model: playing(s, "light", req.decision!.pair.light), deadlineAtMs: req.deadlineAtMs });
}

/** The request's deadline passed unanswered: it times out (is dropped, under the artifact's drops). */
export function expire(s: SimState, req: SimRequest): void {
  if (!req.ended) finish(s, req, s.drops ? { latencyMs: null, outcome: "dropped" } : { latencyMs: null, outcome: "timedOut" });
}

/** An escalated request's deadline nears with no heavy image: its light image goes out, degraded (live: `heavy_late`). */
export function serveLightBeforeDeadline(s: SimState, req: SimRequest): void {
  if (!req.ended) {
    s.result.lightFallbacks++;
    serve(s, req, req.lightModel!, Routes.light, "degraded");
  }
}
