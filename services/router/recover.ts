/**
 * Results sent while this router was disconnected are lost: core NATS delivers to whoever is
 * subscribed at the moment, and a worker acknowledges its item once the result is out. After a
 * reconnect, each item this router still waits on is looked up in the work stream: still there
 * (queued, or in work), its result will come; gone, its result went by while we were away, so a
 * keyed request's is read from the results bucket and any other's item is queued again.
 */
import { isKeyed, resultKey } from "../../actors/request/idempotent.ts";
import type { Logger } from "../telemetry/log.ts";
import type { KV } from "../nats/connection.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import type { ServiceTelemetry } from "../telemetry/tracing.ts";
import { queueEntry, rideOn, storedResult } from "./keyed-work.ts";
import type { PendingWork } from "./pending.ts";

/** How long after a reconnect the check waits: results already on their way arrive first. */
export const RECOVER_AFTER_MS = 1_000;

/** What the check needs. */
export interface RecoverDeps {
  queue: Pick<WorkQueue, "itemAt" | "publish" | "remove">;
  pending: PendingWork;
  results?: KV;
  telemetry: ServiceTelemetry;
  log: Logger;
}

/**
 * `recoverLost` one run at a time: a reconnect while a run goes asks for one more after it (two
 * runs at once could each queue the item again and one remove the other's copy).
 */
export function singleFlight(run: () => Promise<unknown>): () => void {
  let running = false;
  let again = false;
  const go = (): void => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    void run().finally(() => {
      running = false;
      if (again) {
        again = false;
        go();
      }
    });
  };
  return go;
}

/** Checks every waiting item once; returns how many were recovered (read from the bucket or queued again). */
export async function recoverLost(deps: RecoverDeps): Promise<number> {
  let recovered = 0;
  for (const entry of deps.pending.waiting()) {
    // (A publish in flight learns its fate from its own acknowledgement.)
    const seq = entry.seq;
    if (seq === 0) continue;
    const { requestId } = entry.item;
    /** Still the entry its request waits on, at the item looked up (a move or an answer meanwhile changes that). */
    const unchanged = () => deps.pending.isWaiting(entry) && entry.seq === seq;
    const held = await deps.queue.itemAt(seq);
    // Still there, or the server would not say: its result will come, or nothing can be known.
    if (held !== null || !unchanged()) continue;
    const keyed = isKeyed(requestId);
    const stored = keyed ? await storedResult(deps.results, resultKey(requestId, entry.stage)) : null;
    if (!unchanged()) continue;
    if (stored) {
      deps.pending.deliver(stored);
      recovered++;
      continue;
    }
    try {
      const msgId = `${requestId}/${entry.stage}/${entry.item.model}/lost@${seq}`;
      const ack = await queueEntry(deps, entry, msgId);
      const own = ack.own;
      if (!unchanged()) {
        // Answered (or moved) while this publish was in flight: the copy must not cost a GPU
        // (unless it is the very item the entry now waits on, queued by a move or another check).
        if (own && ack.seq !== entry.seq) await deps.queue.remove(ack.seq).catch(() => false);
        continue;
      }
      entry.seq = ack.seq;
      entry.own = own;
      // Another router queued it again first (under the same id): ride on that copy.
      if (!own) rideOn(deps, entry, ack, msgId);
      entry.span?.addEvent("requeued", { "hadis.lost_seq": seq });
      deps.log.info("router.requeued_lost", { requestId, stage: entry.stage, model: entry.item.model });
      recovered++;
    } catch (err) {
      // Not queued again: the request ends at its deadline, as it would have.
      deps.log.warn("router.requeue_failed", { requestId, error: (err as Error).message });
    }
  }
  return recovered;
}
