/** Remembers replies by idempotency key for a while, so a retried request is generated once. */
import { claimKey, keyReused } from "../../actors/request/idempotent.ts";
import type { KV } from "../nats/connection.ts";
import { within } from "../lifecycle/running.ts";

/**
 * Records in the results bucket which request a key is for, so that every router can tell a
 * retry from a key reused for another request (refused with `keyReused`): the first router to
 * see the key writes it, the others compare. A bucket that cannot answer does not stop the
 * request (the check is lost, not the image): `unchecked` hears why.
 */
export async function claimKeyFor(
  results: KV,
  idempotencyKey: string,
  fingerprint: string,
  unchecked: (reason: string) => void = () => {},
  timeoutMs = CLAIM_TIMEOUT_MS,
): Promise<void> {
  // A bucket slow to answer costs the check, not the request's deadline.
  const claimed = claim(results, idempotencyKey, fingerprint, unchecked);
  if (await within(claimed, timeoutMs)) await claimed;
  else unchecked(`the results bucket did not answer within ${timeoutMs} ms`);
}

/** Longest wait for the results bucket to say whether a key is free. */
export const CLAIM_TIMEOUT_MS = 1_000;

async function claim(results: KV, idempotencyKey: string, fingerprint: string, unchecked: (reason: string) => void): Promise<void> {
  const key = claimKey(idempotencyKey);
  const bytes = new TextEncoder().encode(fingerprint);
  let refusal: unknown;
  try {
    await results.create(key, bytes);
    return;
  } catch (err) {
    // Written already (by the first attempt, through any router), or the bucket cannot answer.
    refusal = err;
  }
  const held = await results.get(key).catch(() => null);
  if (held?.operation === "PUT" && held.value.length > 0) {
    if (new TextDecoder().decode(held.value) !== fingerprint) throw keyReused();
    return;
  }
  // Neither written nor there to read: a bucket that is down, or a user not allowed to write it.
  unchecked((refusal as Error)?.message ?? String(refusal));
}

/**
 * A reply to remember, its image in memory of its own: a decoded image is a view into the message
 * it came in (or the socket read that held it), and a remembered view would keep all of that for
 * ten minutes: a 79-byte placeholder PNG pinned a 64 KiB read.
 */
export function detached<T extends { image: Uint8Array }>(reply: T): T {
  const { image } = reply;
  // (`new Uint8Array(view)` copies; a Node Buffer's `slice`, which the decoder hands out, would not.)
  return image.byteOffset === 0 && image.byteLength === image.buffer.byteLength ? reply : { ...reply, image: new Uint8Array(image) };
}

/** What an entry remembers: the reply (or the reply in progress) and what the request asked. */
export interface Remembered<T> {
  value: Promise<T>;
  /** The request's parameters (prompt, seed) as the caller gave them: a key reused for another request is an error. */
  fingerprint: string;
}

interface Entry<T> extends Remembered<T> {
  expiresAtMs: number;
  /** Bytes of the reply once it has come (0 while it runs, and for a failure). */
  bytes: number;
}

/** How much memory the remembered replies may take: `sizeOf` a reply, at most `maxBytes` in all. */
export interface ByteBudget<T> {
  maxBytes: number;
  sizeOf: (value: T) => number;
}

/**
 * A bounded, time-limited map of idempotency key → reply (or the reply in progress): at most
 * `capacity` keys, each for `ttlMs`, and, with a budget, replies of at most `maxBytes` in all (a
 * reply holds its image: 100,000 keys of 1.5 MB PNGs would be 150 GB). The oldest finished
 * replies go first when the budget is spent; a retry of one of them is still answered once, from
 * the keyed results bucket, not from here.
 */
export class IdempotencyCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  private bytes = 0;

  constructor(
    private readonly capacity: number,
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly budget?: ByteBudget<T>,
  ) {}

  /** Entries held now (expired ones included until the next `set` drops them). */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes of the finished replies held now. */
  get heldBytes(): number {
    return this.bytes;
  }

  /** The remembered reply for `key`, with the fingerprint of the request that made it, if any. */
  get(key: string): Remembered<T> | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= this.now()) {
      this.remove(key, entry);
      return undefined;
    }
    return entry;
  }

  /** Remembers `value` for `key`; a rejected value is forgotten so the caller can retry. */
  set(key: string, value: Promise<T>, fingerprint = ""): void {
    // One TTL for all, so entries expire in the order they were set: drop the expired ones from
    // the front (each holds a whole reply, image included; waiting for a lookup of the same key
    // would keep them for as long as the router runs).
    const now = this.now();
    for (const [k, entry] of this.entries) {
      if (entry.expiresAtMs > now) break;
      this.remove(k, entry);
    }
    const old = this.entries.get(key);
    if (old) this.remove(key, old); // a key set again goes to the back
    if (this.entries.size >= this.capacity) {
      const [oldest, entry] = this.entries.entries().next().value!;
      this.remove(oldest, entry);
    }
    const entry: Entry<T> = { value, fingerprint, expiresAtMs: now + this.ttlMs, bytes: 0 };
    this.entries.set(key, entry);
    value.then(
      (v) => {
        if (!this.budget || this.entries.get(key) !== entry) return;
        entry.bytes = this.budget.sizeOf(v);
        this.bytes += entry.bytes;
        this.spend(this.budget.maxBytes);
      },
      // Forget a failure (the caller may retry), unless the key has been set again meanwhile.
      () => {
        if (this.entries.get(key) === entry) this.remove(key, entry);
      },
    );
  }

  /** Drops the oldest finished replies until those held fit in `maxBytes` (replies still running hold nothing). */
  private spend(maxBytes: number): void {
    for (const [k, entry] of this.entries) {
      if (this.bytes <= maxBytes) return;
      if (entry.bytes > 0) this.remove(k, entry);
    }
  }

  private remove(key: string, entry: Entry<T>): void {
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }
}
