/**
 * Results sent while this router was disconnected are lost: core NATS delivers to whoever is
 * subscribed at the moment, and a worker acknowledges its item once the result is out. After a
 * reconnect, each item this router still waits on is looked up in the work stream: still there
 * (queued, or in work), its result will come; gone, its result went by while we were away, so a
 * keyed request's is read from the results bucket and any other's item is queued again.
 */
import { encode } from "../../contracts/envelope.ts";
import { isKeyed, resultKey } from "../../actors/request/idempotent.ts";
import type { Logger } from "../lib/log.ts";
import type { KV, WorkQueue } from "../lib/nats.ts";
import type { ServiceTelemetry } from "../lib/telemetry.ts";
import { storedResult } from "./adapters.ts";
import type { PendingWork } from "./pending.ts";

/** How long after a reconnect the check waits: results already on their way arrive first. */
export const RECOVER_AFTER_MS = 1_000;

/** What the check needs. */
export interface RecoverDeps {
  queue: Pick<WorkQueue, "itemAt" | "publish">;
  pending: PendingWork;
  results?: KV;
  telemetry: ServiceTelemetry;
  log: Logger;
}

/** Checks every waiting item once; returns how many were recovered (read from the bucket or queued again). */
export async function recoverLost(deps: RecoverDeps): Promise<number> {
  let recovered = 0;
  for (const entry of deps.pending.waiting()) {
    // (A publish in flight learns its fate from its own acknowledgement.)
    if (entry.seq === 0) continue;
    const held = await deps.queue.itemAt(entry.seq);
    // Still there, or the server would not say: its result will come, or nothing can be known.
    if (held !== null) continue;
    const { requestId } = entry.item;
    if (deps.pending.get(requestId) !== entry) continue; // answered meanwhile
    const stored = isKeyed(requestId) ? await storedResult(deps.results, resultKey(requestId, entry.stage)) : null;
    if (stored) {
      deps.pending.deliver(stored);
      recovered++;
      continue;
    }
    try {
      const headers = entry.span ? deps.telemetry.inject(entry.span.spanContext()) : undefined;
      const lostSeq = entry.seq;
      const ack = await deps.queue.publish(entry.item.model, encode(entry.item), `${requestId}/${entry.stage}/${entry.item.model}/lost@${lostSeq}`, headers);
      if (deps.pending.get(requestId) !== entry) continue;
      entry.seq = ack.seq;
      entry.own = !ack.duplicate;
      entry.span?.addEvent("requeued", { "hadis.lost_seq": lostSeq });
      deps.log.info("router.requeued_lost", { requestId, stage: entry.stage, model: entry.item.model });
      recovered++;
    } catch (err) {
      // Not queued again: the request ends at its deadline, as it would have.
      deps.log.warn("router.requeue_failed", { requestId, error: (err as Error).message });
    }
  }
  return recovered;
}
