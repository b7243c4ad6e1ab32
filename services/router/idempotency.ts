/** Remembers replies by idempotency key for a while, so a retried request is generated once. */

/** A bounded, time-limited map of idempotency key → reply (or the reply in progress). */
export class IdempotencyCache<T> {
  private readonly entries = new Map<string, { value: Promise<T>; expiresAtMs: number }>();
  constructor(private readonly capacity: number, private readonly ttlMs: number, private readonly now: () => number) {}

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
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { value, expiresAtMs: this.now() + this.ttlMs });
    value.catch(() => this.entries.delete(key));
  }
}
