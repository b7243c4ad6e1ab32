/**
 * Requests with an idempotency key get a request id and a seed derived from the key, so a retry
 * through any router names the same work: JetStream drops the re-queued items as duplicates
 * (same message ids) and the retry picks up the results the workers left in the results bucket.
 */
import { createHash } from "node:crypto";

const PREFIX = "k-";

/** The request id of a keyed request. */
export function keyedRequestId(idempotencyKey: string): string {
  return PREFIX + createHash("sha256").update(idempotencyKey).digest("hex").slice(0, 32);
}

/** The seed of a keyed request that gave none (the same image on every retry). */
export function keyedSeed(idempotencyKey: string): number {
  return createHash("sha256").update(`seed:${idempotencyKey}`).digest().readUInt32BE(0);
}

/** True for the request id of a keyed request. */
export function isKeyed(requestId: string): boolean {
  return requestId.startsWith(PREFIX);
}

/** The results-bucket key of a keyed request's stage. */
export function resultKey(requestId: string, stage: "light" | "heavy"): string {
  return `${requestId}.${stage}`;
}
