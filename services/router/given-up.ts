/**
 * Items JetStream gave up on. A worker that crashes (or stalls past the ack wait) with an item
 * on its last delivery (`max_deliver`) leaves it unacknowledged; the server will not deliver it
 * again, so no result will ever come, and the request would wait out its deadline. The server
 * says so in a max-deliveries advisory naming the item's stream sequence: the router waiting on
 * that item fails its stage with `generation_failed` at once (a failed heavy stage still serves
 * the light image) and removes the item, which a work-queue stream would otherwise keep.
 */
import { decode } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import { MaxDeliveriesAdvisorySchema } from "../../contracts/messages.ts";
import type { Logger } from "../telemetry/log.ts";
import { recordGivenUp } from "../telemetry/metrics.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import type { PendingWork } from "./pending.ts";

/** What failing given-up items needs. */
export interface GivenUpDeps {
  queue: Pick<WorkQueue, "remove">;
  pending: PendingWork;
  /** The work stream's name: advisories of other streams are not ours. */
  workStream: string;
  log: Logger;
}

/** Handles one advisory: fails the stage waiting on its item, if this router has one; returns how many it failed. */
export function failGivenUp(deps: GivenUpDeps, data: Uint8Array): number {
  let advisory;
  try {
    advisory = decode(MaxDeliveriesAdvisorySchema, data, "max-deliveries advisory", "json");
  } catch (err) {
    deps.log.warn("router.bad_advisory", { error: (err as Error).message });
    return 0;
  }
  if (advisory.stream !== deps.workStream) return 0;
  // (Several entries when routers' keyed retries share one item; each is answered.)
  const waiting = deps.pending.waiting().filter((entry) => entry.seq === advisory.stream_seq);
  for (const entry of waiting) {
    const { requestId } = entry.item;
    deps.pending.drop(entry);
    if (entry.own) void deps.queue.remove(entry.seq).catch(() => false);
    recordGivenUp(entry.item.model);
    deps.log.warn("router.work_given_up", { requestId, stage: entry.stage, model: entry.item.model, deliveries: advisory.deliveries });
    entry.reject(
      new HadisError(
        "generation_failed",
        `no worker finished the ${entry.stage} generation on ${entry.item.model}: it was delivered ${advisory.deliveries} times and never acknowledged (each worker that took it crashed or stalled)`,
        { requestId },
      ),
    );
  }
  return waiting.length;
}
