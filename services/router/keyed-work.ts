/**
 * Keyed requests' work: queueing an item that may be a retry's duplicate of an earlier attempt's
 * (through this router or another), and reading or watching the results bucket for its image.
 */
import { answerableUntil, heldItem, isKeyed, resultKey } from "../../actors/request/idempotent.ts";
import { encode } from "../../contracts/envelope.ts";
import type { WorkItem } from "../../contracts/messages.ts";
import { HadisError } from "../../contracts/errors.ts";
import type { KV, MsgHdrs } from "../nats/connection.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import type { Logger } from "../telemetry/log.ts";
import type { ServiceTelemetry } from "../telemetry/tracing.ts";
import type { PendingItem, PendingWork } from "./pending.ts";

/** What keyed work needs: the queue, the results bucket, the router's waiting entries. */
export interface KeyedDeps {
  queue: Pick<WorkQueue, "publish" | "itemAt" | "remove">;
  pending: PendingWork;
  results?: KV;
  /** Called once an item's publish is acknowledged (its sequence known). */
  afterEnqueue?: (entry: PendingItem) => void;
  log: Logger;
}

/** The error of a publish to a model's work queue that failed. */
export function enqueueError(model: string, err: unknown): HadisError {
  const message = (err as Error).message ?? String(err);
  if (/maximum messages|resource limits|insufficient resources|exceeded/i.test(message)) {
    return new HadisError("overloaded", `work queue of ${model} is full`, { retryAfterMs: 1_000 }, { cause: err });
  }
  return new HadisError("no_capacity", `cannot enqueue for ${model}: ${message}`, {}, { cause: err });
}

/** The trace context of a waiting entry's stage span, as headers of its item (none when untraced). */
export function headersOf(telemetry: ServiceTelemetry | undefined, entry: PendingItem): MsgHdrs | undefined {
  return entry.span && telemetry ? telemetry.inject(entry.span.spanContext()) : undefined;
}

/**
 * Queues a waiting entry's item (for its model) under `msgId`, carrying its stage span's trace
 * context: a keyed one as `enqueueKeyed` does; an unkeyed one's duplicate is its own earlier
 * publish (its id is its own).
 */
export async function queueEntry(
  deps: Pick<KeyedDeps, "queue" | "results"> & { telemetry?: ServiceTelemetry },
  entry: PendingItem,
  msgId: string,
): Promise<KeyedAck> {
  const headers = headersOf(deps.telemetry, entry);
  if (isKeyed(entry.item.requestId)) return enqueueKeyed(deps, entry.item, msgId, headers);
  const ack = await deps.queue.publish(entry.lane ?? entry.item.model, encode(entry.item), msgId, headers);
  return { ...ack, own: true, ridesUntilMs: Infinity };
}

/** Delivers the stored result of a keyed request's stage once it appears; stops when the stage settles. */
export function watchResult(deps: Pick<KeyedDeps, "results" | "pending">, key: string, settled: Promise<unknown>): void {
  void deps.results!.watch({ key }).then(
    (iter) => {
      // Either way (a failed or expired stage too): `finally` would hand on the rejection, unhandled.
      const stop = () => iter.stop();
      settled.then(stop, stop);
      void (async () => {
        for await (const entry of iter) {
          if (entry.operation === "PUT" && entry.value.length > 0) deps.pending.deliver(entry.value);
        }
      })();
    },
    () => undefined,
  );
}

/** A keyed item's publish: dropped as a duplicate of another attempt's, it rides on that item at `seq`, whose result can come until `ridesUntilMs`. */
export interface KeyedAck {
  seq: number;
  duplicate: boolean;
  /** The item at `seq` is this very publish (new, or a duplicate of itself: a publish asked again after a lost acknowledgement). */
  own: boolean;
  ridesUntilMs: number;
}

/**
 * Queues a keyed request's item. Dropped as a duplicate, the item is an earlier attempt's (a retry
 * through this router or another): while that item is queued or in work, its result will reach
 * the results bucket. Gone or past its deadline with no result stored (its request ended and
 * removed it, a worker dropped it as expired, its generation failed), nothing will come: queued again
 * under an id naming the dead one, so that retries through several routers still queue it once.
 * A duplicate of this very item (the same router's reply subject, enqueue time and deadline) is
 * its own: the queue asks a publish again when its acknowledgement is late.
 */
export async function enqueueKeyed(
  deps: Pick<KeyedDeps, "queue" | "results">,
  item: WorkItem,
  msgId: string,
  headers: MsgHdrs | undefined,
): Promise<KeyedAck> {
  const data = encode(item);
  const key = resultKey(item.requestId, item.stage);
  let id = msgId;
  for (let attempt = 0; ; attempt++) {
    const ack = await deps.queue.publish(item.model, data, id, headers);
    if (!ack.duplicate) return { ...ack, own: true, ridesUntilMs: Infinity };
    const held = heldItem(await deps.queue.itemAt(ack.seq));
    if (held && held.replyTo === item.replyTo && held.enqueuedAtMs === item.enqueuedAtMs && held.deadlineAtMs === item.deadlineAtMs) {
      return { ...ack, own: true, ridesUntilMs: Infinity };
    }
    const until = answerableUntil(held);
    if (until > Date.now() || attempt >= 8) return { ...ack, own: false, ridesUntilMs: until };
    if (await storedResult(deps.results, key)) return { ...ack, own: false, ridesUntilMs: Infinity };
    id = `${msgId}@${ack.seq}`;
  }
}

/**
 * How long after the deadline of the item a keyed retry rides on it looks again. A worker that took
 * the item before its deadline may still be finishing it: its image still reaches the results
 * bucket, and the retry's own item, queued meanwhile, is removed if it is still waiting then.
 */
export const RIDE_MARGIN_MS = 50;

/** A keyed request's stage's result in the results bucket, if it is there already. */
export async function storedResult(results: KV | undefined, key: string): Promise<Uint8Array | null> {
  if (!results) return null;
  const stored = await results.get(key).catch(() => null);
  return stored?.operation === "PUT" && stored.value.length > 0 ? stored.value : null;
}

/**
 * A keyed entry whose publish was dropped as a duplicate rides on the item at `ack.seq` (another
 * attempt's, through this router or another): that item's result reaches the results bucket, so
 * the bucket is watched (once per entry); and once that item's deadline has passed, if it is due
 * before this request's, the entry's item is queued again under `msgId` (a worker drops an item
 * unrun past its deadline, and its router removes it when its request ends). Whatever queued the
 * entry's item (its first publish, a move to another model, a re-queue after a drop) calls this
 * on a duplicate: before, a request that rode on a moved copy of another router's item waited
 * out its own deadline once that copy was gone.
 */
export function rideOn(deps: KeyedDeps & { telemetry?: ServiceTelemetry }, entry: PendingItem, ack: KeyedAck, msgId: string): void {
  const { requestId } = entry.item;
  const key = resultKey(requestId, entry.stage);
  const settled = entry.settled ?? Promise.resolve();
  if (!entry.watched) {
    entry.watched = true;
    watchResult(deps, key, settled);
  }
  if (ack.ridesUntilMs >= entry.item.deadlineAtMs) return;
  // Still riding on that item: waiting, not moved or queued again since.
  const riding = () => deps.pending.isWaiting(entry) && !entry.own && entry.seq === ack.seq;
  const timer = setTimeout(
    () => {
      if (!riding()) return;
      queueEntry(deps, entry, msgId).then(
        (again) => {
          const own = again.own;
          if (!riding()) {
            if (own) void deps.queue.remove(again.seq).catch(() => false);
            return;
          }
          entry.seq = again.seq;
          entry.own = own;
          deps.afterEnqueue?.(entry);
          deps.log.debug("router.ride_ended", { requestId, stage: entry.stage, seq: again.seq, duplicate: again.duplicate });
          if (!own) rideOn(deps, entry, again, msgId);
          // The item ridden on may answer after all (a batch finishing it past its deadline): then
          // this one, if still queued, must not cost a GPU.
          else
            void settled.then(
              () => entry.own && entry.seq === again.seq && deps.queue.remove(again.seq).catch(() => false),
              () => undefined,
            );
        },
        (err: unknown) => {
          if (!riding()) return;
          deps.pending.drop(entry);
          entry.reject(enqueueError(entry.item.model, err));
        },
      );
    },
    Math.max(0, ack.ridesUntilMs - Date.now()) + RIDE_MARGIN_MS,
  );
  const stop = () => clearTimeout(timer);
  settled.then(stop, stop);
}
