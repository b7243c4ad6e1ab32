/** Remembers replies by idempotency key for a while, so a retried request is generated once. */

/** A bounded, time-limited map of idempotency key → reply (or the reply in progress). */
export class IdempotencyCache<T> {
  private readonly entries = new Map<string, { value: Promise<T>; expiresAtMs: number }>();
  constructor(private readonly capacity: number, private readonly ttlMs: number, private readonly now: () => number) {}

  /** Entries held now (expired ones included until the next `set` drops them). */
  get size(): number {
    return this.entries.size;
  }

  /** The remembered reply for `key`, if any. */
  get(key: string): Promise<T> | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  /** Remembers `value` for `key`; a rejected value is forgotten so the caller can retry. */
  set(key: string, value: Promise<T>): void {
    // One TTL for all, so entries expire in the order they were set: drop the expired ones from
    // the front (each holds a whole reply, image included; waiting for a lookup of the same key
    // would keep them for as long as the router runs).
    const now = this.now();
    for (const [k, entry] of this.entries) {
      if (entry.expiresAtMs > now) break;
      this.entries.delete(k);
    }
    this.entries.delete(key); // a key set again goes to the back
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    const entry = { value, expiresAtMs: now + this.ttlMs };
    this.entries.set(key, entry);
    // Forget a failure (the caller may retry), unless the key has been set again meanwhile.
    value.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
  }
}
