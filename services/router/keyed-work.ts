/**
 * Keyed requests' work: queueing an item that may be a retry's duplicate of an earlier attempt's
 * (through this router or another), and reading or watching the results bucket for its image.
 */
import { answerableUntil } from "../../actors/request/idempotent.ts";
import type { KV, MsgHdrs } from "../lib/nats.ts";
import type { RouterActorDeps } from "./adapters.ts";

/** Delivers the stored result of a keyed request's stage once it appears; stops when the stage settles. */
export function watchResult(deps: RouterActorDeps, key: string, settled: Promise<unknown>): void {
  void deps.results!.watch({ key }).then((iter) => {
    // Either way (a failed or expired stage too): `finally` would hand on the rejection, unhandled.
    const stop = () => iter.stop();
    settled.then(stop, stop);
    void (async () => {
      for await (const entry of iter) {
        if (entry.operation === "PUT" && entry.value.length > 0) deps.pending.deliver(entry.value);
      }
    })();
  }, () => undefined);
}

/** A keyed item's publish: dropped as a duplicate, it rides on the earlier item at `seq`, whose result can come until `ridesUntilMs`. */
export interface KeyedAck {
  seq: number;
  duplicate: boolean;
  ridesUntilMs: number;
}

/**
 * Queues a keyed request's item. Dropped as a duplicate, the item is an earlier attempt's (a retry
 * through this router or another): while that item is queued or in work, its result will reach
 * the results bucket. Gone or past its deadline with no result stored (its request ended and
 * removed it, a worker dropped it as expired, its generation failed), nothing will come: queued again
 * under an id naming the dead one, so that retries through several routers still queue it once.
 */
export async function enqueueKeyed(deps: RouterActorDeps, model: string, data: Uint8Array, msgId: string, key: string, headers: MsgHdrs | undefined): Promise<KeyedAck> {
  let id = msgId;
  for (let attempt = 0; ; attempt++) {
    const ack = await deps.queue.publish(model, data, id, headers);
    if (!ack.duplicate || attempt >= 8) return { ...ack, ridesUntilMs: Infinity };
    const until = answerableUntil(await deps.queue.itemAt(ack.seq));
    if (until > Date.now()) return { ...ack, ridesUntilMs: until };
    if (await storedResult(deps.results, key)) return { ...ack, ridesUntilMs: Infinity };
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
