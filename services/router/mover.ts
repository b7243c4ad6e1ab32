/**
 * Moves a waiting item off a model the plan no longer serves: removed from that model's queue by
 * sequence, re-queued for the model that now plays its stage. The item keeps its place in the
 * request's trace: the new message carries the stage span's `traceparent`, and the span gets a
 * `moved` event.
 */
import { isKeyed } from "../../actors/request/idempotent.ts";
import { HadisError } from "../../contracts/errors.ts";
import type { Plan } from "../../contracts/messages.ts";
import type { ServiceTelemetry } from "../telemetry/tracing.ts";
import { queueEntry, rideOn, type KeyedDeps } from "./keyed-work.ts";
import type { PendingItem } from "./pending.ts";

/** What moving needs. */
export interface MoverDeps extends KeyedDeps {
  telemetry: ServiceTelemetry;
  /** Called once the moved item's publish is acknowledged (plans can move faster than a publish). */
  afterEnqueue: (entry: PendingItem) => void;
}

/**
 * The move function of one router; a move already under way for an entry is not started twice.
 * A keyed entry riding on another attempt's item (another router's, or one queued before this
 * router's restart) does not remove that item: its own router moves it, and a rider that took it
 * left that router waiting on a copy whose result came to the rider alone. It queues its own copy
 * for the new model under the id every attempt uses for that model, so the second to move rides
 * on the first's copy (watching the results bucket, and queueing again if that copy dies first).
 */
export function createMover(deps: MoverDeps): (entry: PendingItem, to: string, plan: Plan) => Promise<void> {
  const moving = new Set<PendingItem>();
  return async (entry, to, plan) => {
    if (moving.has(entry)) return;
    moving.add(entry);
    const from = entry.item.model;
    const { requestId } = entry.item;
    const keyed = isKeyed(requestId);
    let removed: boolean;
    try {
      removed = (keyed && entry.own === false) || (await deps.queue.remove(entry.seq));
    } catch {
      removed = false;
    } finally {
      moving.delete(entry);
    }
    if (!removed || !deps.pending.isWaiting(entry)) return;
    entry.item = { ...entry.item, model: to, planEpoch: plan.epoch };
    entry.seq = 0;
    entry.span?.addEvent("moved", { "hadis.from": from, "hadis.to": to, "hadis.plan_epoch": plan.epoch });
    // A keyed stage has one id per model, whoever queues it and in whichever plan (a copy that
    // died is queued again under an id naming it: `enqueueKeyed`); an unkeyed one, one per plan (a
    // move back to a model must not be dropped as a duplicate of the item moved off it).
    const msgId = keyed ? `${requestId}/${entry.stage}/${to}` : `${requestId}/${entry.stage}/${to}/${plan.epoch}`;
    try {
      const ack = await queueEntry(deps, entry, msgId);
      entry.seq = ack.seq;
      entry.own = ack.own; // the copy is this router's to remove when its request ends
      // The request may have ended while the publish was in flight: its item must not cost a GPU.
      if (!deps.pending.isWaiting(entry)) {
        if (entry.own) await deps.queue.remove(entry.seq).catch(() => false);
        return;
      }
      deps.log.debug("router.moved", { requestId, from, to, epoch: plan.epoch, duplicate: ack.duplicate });
      deps.afterEnqueue(entry);
      if (!entry.own) rideOn(deps, entry, ack, msgId);
    } catch (err) {
      // The request fails with this error and its actor is done: nothing else would forget the entry.
      deps.pending.drop(entry);
      entry.reject(new HadisError("no_capacity", `could not move work from ${from} to ${to}: ${(err as Error).message}`));
    }
  };
}
