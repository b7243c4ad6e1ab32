/**
 * The profile-driven serving system as a deterministic discrete-event simulation: no NATS, a
 * simulated clock, and the live system's own pieces — `controlTick` (policy → MILP → assignment
 * → damping), `decideRoute` with the router's scorer and threshold, the profile judge, per-model
 * FIFO queues and workers with the batch, expiry and swap semantics of `WorkerAgent`.
 *
 * The request lifecycle mirrors `RequestMachine` in a lean event loop (route → light → judge →
 * heavy, deadline from arrival) rather than running one XState actor per request; the live
 * router's transport details that change outcomes are mirrored too (see `sim-plans.ts`). The
 * artifact's mechanisms (`actors/artifact/mechanisms.ts`) switch parts of it to the paper
 * artifact's behaviour, one by one.
 *
 * This file is the event loop; the stages it dispatches to are functions over one `SimState`
 * (`sim-state.ts`): workers (`sim-workers.ts`), a request's life (`sim-requests.ts`), arrivals
 * and admission (`sim-arrivals.ts`), plans (`sim-plans.ts`) and control (`sim-control.ts`).
 */
import { ARTIFACT_STOP_AFTER_TRACE_MS } from "../artifact/scoring.ts";
import { referenceIndexFor } from "../profile/profile-set.ts";
import { moveTarget } from "../routing/move-target.ts";
import { arrive } from "./sim-arrivals.ts";
import { reportArrivals, runSecond, runTick } from "./sim-control.ts";
import { deliver, expire, judge, rescueWithLight, serveLightBeforeDeadline } from "./sim-requests.ts";
import { newSimState } from "./sim-state.ts";
import { advance, heartbeat, loaded, rebuildRouting, unloaded } from "./sim-workers.ts";
import type { SimConfig, SimRequest, SimResult } from "./types.ts";

export type { SimConfig, SimPlanChange, SimResult } from "./types.ts";

/** Runs one policy over a trace; deterministic for the same inputs and seed. */
export async function simulate(config: SimConfig): Promise<SimResult> {
  const s = newSimState(config);
  const { profiles, agenda, result, workers } = s;
  const requests: SimRequest[] = config.arrivals.map((a, index) => {
    const prompt = config.prompts[a.promptIdx % config.prompts.length];
    const refIndex = referenceIndexFor(profiles, prompt).index;
    const sameList = a.promptIdx < profiles.reference.prompts.length && profiles.reference.prompts[a.promptIdx] === prompt;
    return {
      index,
      id: `${config.seed}-${index}`,
      arrivalMs: a.atMs,
      prompt,
      refIndex,
      seqIndex: sameList ? a.promptIdx : refIndex,
      deadlineAtMs: a.atMs + s.giveUpAfterMs,
      waiting: null,
      ended: false,
    };
  });
  for (const req of requests) agenda.push(req.arrivalMs, { kind: "arrival", req });
  // Every request has ended by its deadline; the clock stops after the last one, so a request
  // left open by a bug shows as `unfinished` instead of ticking forever.
  const lastDeadlineMs = requests.reduce((m, r) => Math.max(m, r.deadlineAtMs), s.now);
  const lastArrivalMs = requests.reduce((m, r) => Math.max(m, r.arrivalMs), s.now);
  const running = () => s.open > 0 && s.now < lastDeadlineMs;
  if (!s.artifactControl) agenda.push(s.now + 250, { kind: "tick" });
  agenda.push(s.now, { kind: "second" });
  agenda.push(s.now + s.statsEveryMs, { kind: "stats" });
  if (s.dispatch) agenda.push(s.now, { kind: "routing" });
  const heartbeatEveryMs = s.heartbeatEveryMs;
  // Half a beat before the first tick: on average what a live manager's view lags by.
  if (heartbeatEveryMs > 0) agenda.push(s.now + 250 - heartbeatEveryMs / 2 + heartbeatEveryMs, { kind: "beat" });

  for (let ev = agenda.pop(); ev; ev = agenda.pop()) {
    const now = ev.atMs;
    s.now = now;
    const e = ev.event;
    switch (e.kind) {
      case "arrival":
        arrive(s, e.req);
        break;
      case "deadline":
        expire(s, e.req);
        break;
      case "lightBeforeDeadline":
        serveLightBeforeDeadline(s, e.req);
        break;
      case "rescue":
        rescueWithLight(s, e.req);
        break;
      case "judged":
        if (!e.req.ended) await judge(s, e.req);
        break;
      case "batchDone": {
        const w = e.worker;
        const batch = w.batch;
        const ran = w.batchModel!;
        w.busy = false;
        w.batch = [];
        for (const item of batch) deliver(s, item, ran, w.batchMs);
        advance(s, w);
        break;
      }
      case "unloaded":
        unloaded(s, e.worker, e.from);
        break;
      case "beat":
        heartbeat(s);
        if (running()) agenda.push(now + heartbeatEveryMs, { kind: "beat" });
        break;
      case "loaded":
        loaded(s, e.worker, e.from, e.to);
        break;
      case "stats":
        reportArrivals(s);
        if (running()) agenda.push(now + s.statsEveryMs, { kind: "stats" });
        break;
      case "tick":
        await runTick(s);
        if (running()) agenda.push(now + s.tickMs, { kind: "tick" });
        break;
      case "second":
        await runSecond(s);
        // The controller ticks until every outcome is in its rows; under the artifact's scoring it
        // stops soon after the last query is sent, as run_E1.sh stops every node at TRACE ENDED.
        if (s.on("scoring") ? now < lastArrivalMs + ARTIFACT_STOP_AFTER_TRACE_MS : running() || s.ledger.unresolved > 0)
          agenda.push(now + 1_000, { kind: "second" });
        break;
      case "routing":
        rebuildRouting(s);
        if (running()) agenda.push(now + 1_000, { kind: "routing" });
        break;
    }
  }
  result.swaps = workers.reduce((n, w) => n + w.swaps, 0);
  for (const [m, q] of s.queues) result.leftInQueue[m] = q.length;
  for (const w of workers)
    if (w.desired && w.queue.length > 0) result.leftInQueue[w.desired] = (result.leftInQueue[w.desired] ?? 0) + w.queue.length;
  result.unfinished = requests.filter((r) => !r.record).length;
  result.records = requests.map((r) => r.record ?? { arrivalMs: r.arrivalMs, latencyMs: null, outcome: "dropped" });
  result.rows = s.ledger.rows;
  return result;
}

export { moveTarget };
