/**
 * Requests with an idempotency key get a request id derived from the key and what it asks
 * (prompt, seed), and a seed derived from the key, so a retry through any router names the same
 * work: JetStream drops the re-queued items as duplicates (same message ids) and the retry picks
 * up the results the workers left in the results bucket. A key reused for another request names
 * other work: within the claim's 10 minutes it is refused (`keyReused`); after them, or when the
 * claim could not be checked, it can never be answered with the earlier request's image.
 */
import { createHash } from "node:crypto";
import { decode } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import { WorkItemSchema, type WorkItem } from "../../contracts/messages.ts";

const PREFIX = "k-";

/** The request id of a keyed request: its key and its `fingerprintOf`. */
export function keyedRequestId(idempotencyKey: string, fingerprint: string): string {
  return PREFIX + createHash("sha256").update(`${idempotencyKey}\n${fingerprint}`).digest("hex").slice(0, 32);
}

/** The seed of a keyed request that gave none (the same image on every retry). */
export function keyedSeed(idempotencyKey: string): number {
  return createHash("sha256").update(`seed:${idempotencyKey}`).digest().readUInt32BE(0);
}

/** True for the request id of a keyed request. */
export function isKeyed(requestId: string): boolean {
  return requestId.startsWith(PREFIX);
}

/**
 * What a keyed request asks, as the caller gave it (a retry asks the same; its deadline may be
 * what is left): 32 hex. Generation settings and a pinned quality count when given (a request
 * without them keeps the fingerprint it always had, so routers of either version agree on it).
 */
export function fingerprintOf(prompt: string, seed: number | undefined, asked: Record<string, unknown> = {}): string {
  const given = Object.keys(asked)
    .sort()
    .filter((k) => asked[k] !== undefined)
    .map((k) => [k, asked[k]]);
  const what = given.length > 0 ? [prompt, seed ?? null, given] : [prompt, seed ?? null];
  return createHash("sha256").update(JSON.stringify(what)).digest("hex").slice(0, 32);
}

/** The error of a key reused for another request. */
export function keyReused(): HadisError {
  return new HadisError(
    "invalid_request",
    "this idempotency key was used for another request (prompt, seed or settings) in the last 10 minutes: a retry must repeat its request, a new request needs a new key",
    { field: "idempotencyKey" },
  );
}

/** The results-bucket key under which the first router to see an idempotency key records what it asked (its fingerprint). */
export function claimKey(idempotencyKey: string): string {
  return `c-${createHash("sha256").update(`claim\n${idempotencyKey}`).digest("hex").slice(0, 32)}.claim`;
}

/** The results-bucket key of a keyed request's stage. */
export function resultKey(requestId: string, stage: "light" | "heavy"): string {
  return `${requestId}.${stage}`;
}

/** The work item a stream sequence holds, as `itemAt` read it: null when gone, undefined when unknown (unreadable, or it does not decode). */
export function heldItem(held: Uint8Array | null | undefined): WorkItem | null | undefined {
  if (!held) return held;
  try {
    return decode(WorkItemSchema, held, "work item");
  } catch {
    return undefined;
  }
}

/**
 * Until when (epoch ms) an earlier attempt's item, as the stream still holds it, can bring a
 * result: its deadline (a worker drops it unrun after that). Gone (null): never (-Infinity).
 * Unsure (undefined, or unreadable): always (Infinity).
 */
export function answerableUntil(held: WorkItem | Uint8Array | null | undefined): number {
  const item = held instanceof Uint8Array ? heldItem(held) : held;
  return item === undefined ? Infinity : item === null ? -Infinity : item.deadlineAtMs;
}
