/**
 * A new plan reaches the system: workers follow it, and waiting work on models left without
 * workers moves to the model now playing its stage (the live router's rescue), or under the
 * artifact's random dispatch leaves the workers that no longer hold its model.
 */
import type { Plan } from "../../contracts/messages.ts";
import { moveTarget } from "../routing/move-target.ts";
import type { SimState } from "./sim-state.ts";
import { advance, push } from "./sim-workers.ts";
import type { WorkItem } from "./types.ts";

/** Records the plan adopted now (with the swaps it asks and the demand it was made for) and applies it. */
export function adopt(s: SimState, p: Plan, swapped: number, demandQps: number): void {
  s.result.plans.push({
    atMs: s.now,
    epoch: p.epoch,
    expectedFid: p.expectedFid,
    pair: p.pair,
    routerThreshold: p.routerThreshold,
    discThreshold: p.discThreshold,
    models: p.models,
    degraded: p.degraded ?? 0,
    swapped,
    demandQps,
    reason: p.reason,
  });
  applyPlan(s, p);
}

/** A new plan: workers follow it, and waiting work on models left without workers moves (the live router's rescue). */
function applyPlan(s: SimState, next: Plan): void {
  s.plan = next;
  for (const w of s.workers) {
    const model = next.assignment[w.id] ?? null;
    w.batchSize = model ? Math.max(1, next.models[model]?.batchSize ?? 1) : 1;
    w.desired = model;
  }
  if (s.dispatch) redispatch(s, next);
  else moveStranded(s, next);
  for (const w of s.workers) advance(s, w);
}

/** Shared queues: items of a model left without workers go to the model now playing their stage. */
function moveStranded(s: SimState, next: Plan): void {
  for (const [model, queue] of s.queues) {
    const keep: WorkItem[] = [];
    const move: { item: WorkItem; to: string }[] = [];
    for (const item of queue) {
      const to = isWaitedOn(item) ? moveTarget(next, item.stage, model) : null;
      if (to) move.push({ item, to });
      else keep.push(item);
    }
    s.queues.set(model, keep);
    // Items a worker is still running are deleted from the stream too and re-queued: the live
    // router cannot tell them from queued ones, so they run twice (first result wins). Once
    // moved, the request waits on the copy, so the running item is not moved again.
    for (const w of s.workers) {
      if (w.busy && w.batch.length > 0 && w.batch[0].model === model) {
        for (const item of w.batch) {
          const to = isWaitedOn(item) ? moveTarget(next, item.stage, model) : null;
          if (to) move.push({ item: { ...item }, to });
        }
      }
    }
    for (const { item, to } of move) {
      s.result.movedItems++;
      item.req.waitingModel = to;
      push(s, { ...item, model: to });
    }
  }
}

/** Per-worker queues: a worker's queue stays with it through a free swap; otherwise its items go to workers of their model (or the one playing their stage). */
function redispatch(s: SimState, next: Plan): void {
  if (s.freeSwaps) return;
  for (const w of s.workers) {
    const leaving = w.queue.filter((it) => it.model !== w.desired);
    if (leaving.length === 0) continue;
    w.queue = w.queue.filter((it) => it.model === w.desired);
    for (const item of leaving) {
      if (!isWaitedOn(item)) continue;
      const to = moveTarget(next, item.stage, item.model) ?? item.model;
      s.result.movedItems++;
      item.req.waitingModel = to;
      push(s, { ...item, model: to });
    }
  }
}

/** Whether the router still waits on this item (the live router moves only its pending entry). */
function isWaitedOn(item: WorkItem): boolean {
  return !item.req.ended && item.req.waiting === item.stage && item.req.waitingModel === item.model;
}
