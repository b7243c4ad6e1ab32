/** Entries a router waits on, for unit tests of what acts on them (reconnect check, given-up advisories). */
import { PendingWork, type PendingItem } from "../../services/router/pending.ts";
import { PROTOCOL_VERSION, type WorkItem } from "../../contracts/messages.ts";

/** A light work item of `requestId` for model `m`, due in a minute. */
export const lightItem = (requestId: string): WorkItem => ({
  v: PROTOCOL_VERSION,
  requestId,
  stage: "light",
  prompt: "a cat",
  seed: 1,
  model: "m",
  replyTo: "hadis.result.r1",
  enqueuedAtMs: 0,
  deadlineAtMs: Date.now() + 60_000,
  planEpoch: 1,
});

/** A light entry waiting on the item at `seq` (this router's own publish unless `own` is false), recording how it ended. */
export function waiting(pending: PendingWork, requestId: string, seq: number, own = true): PendingItem & { ended: unknown[] } {
  const ended: unknown[] = [];
  const entry: PendingItem & { ended: unknown[] } = {
    item: lightItem(requestId),
    stage: "light",
    seq,
    own,
    ended,
    resolve: (x: unknown) => void ended.push(x),
    reject: (err: unknown) => void ended.push(err),
  };
  pending.wait(entry);
  return entry;
}
