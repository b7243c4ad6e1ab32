/**
 * Moves a waiting item off a model the plan no longer serves: removed from that model's queue by
 * sequence, re-queued for the model that now plays its stage. The item keeps its place in the
 * request's trace: the new message carries the stage span's `traceparent`, and the span gets a
 * `moved` event.
 */
import { encode } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import type { Plan } from "../../contracts/messages.ts";
import type { Logger } from "../lib/log.ts";
import type { WorkQueue } from "../lib/nats.ts";
import type { ServiceTelemetry } from "../lib/telemetry.ts";
import type { PendingItem, PendingWork } from "./pending.ts";

/** What moving needs. */
export interface MoverDeps {
  queue: Pick<WorkQueue, "remove" | "publish">;
  pending: PendingWork;
  telemetry: ServiceTelemetry;
  log: Logger;
  /** Called once the moved item's publish is acknowledged (plans can move faster than a publish). */
  afterEnqueue: (entry: PendingItem) => void;
}

/** Queues a waiting entry's item (for its model) under `msgId`, carrying its stage span's trace context. */
export function publishEntry(deps: Pick<MoverDeps, "queue" | "telemetry">, entry: PendingItem, msgId: string): Promise<{ seq: number; duplicate: boolean }> {
  const headers = entry.span ? deps.telemetry.inject(entry.span.spanContext()) : undefined;
  return deps.queue.publish(entry.item.model, encode(entry.item), msgId, headers);
}

/** The move function of one router; a move already under way for an entry is not started twice. */
export function createMover(deps: MoverDeps): (entry: PendingItem, to: string, plan: Plan) => Promise<void> {
  const moving = new Set<PendingItem>();
  return async (entry, to, plan) => {
    if (moving.has(entry)) return;
    moving.add(entry);
    const from = entry.item.model;
    let removed: boolean;
    try {
      removed = await deps.queue.remove(entry.seq);
    } catch {
      removed = false;
    } finally {
      moving.delete(entry);
    }
    if (!removed || deps.pending.get(entry.item.requestId) !== entry) return;
    entry.item = { ...entry.item, model: to, planEpoch: plan.epoch };
    entry.seq = 0;
    entry.span?.addEvent("moved", { "hadis.from": from, "hadis.to": to, "hadis.plan_epoch": plan.epoch });
    try {
      const ack = await publishEntry(deps, entry, `${entry.item.requestId}/${entry.stage}/${to}/${plan.epoch}`);
      entry.seq = ack.seq;
      entry.own = !ack.duplicate; // the copy is this router's to remove when its request ends
      // The request may have ended while the publish was in flight: its item must not cost a GPU.
      if (deps.pending.get(entry.item.requestId) !== entry) {
        await deps.queue.remove(entry.seq).catch(() => false);
        return;
      }
      deps.log.debug("router.moved", { requestId: entry.item.requestId, from, to, epoch: plan.epoch });
      deps.afterEnqueue(entry);
    } catch (err) {
      // The request fails with this error and its actor is done: nothing else would forget the entry.
      deps.pending.drop(entry);
      entry.reject(new HadisError("no_capacity", `could not move work from ${from} to ${to}: ${(err as Error).message}`));
    }
  };
}
