/** Failures that last (JetStream unavailable) in the log once when they start and once when they end, not on every tick. */
import type { Logger } from "../telemetry/log.ts";

export class OutageLog {
  private readonly down = new Set<string>();

  constructor(
    private readonly log: Pick<Logger, "warn" | "info">,
    private readonly failedEvent: string,
    private readonly recoveredEvent: string,
  ) {}

  /** `key` failed now: said if it had not been failing. */
  failed(key: string, fields: Record<string, unknown>): void {
    if (!this.down.has(key)) this.log.warn(this.failedEvent, fields);
    this.down.add(key);
  }

  /** Exactly `keys` are failing now: each that starts or ends is said once. */
  track(keys: ReadonlySet<string> | ReadonlyMap<string, unknown>, fields: (key: string) => Record<string, unknown>): void {
    for (const key of this.down) if (!keys.has(key)) this.works(key, fields(key));
    for (const key of keys.keys()) this.failed(key, fields(key));
  }

  /** `key` works now: said if it had been failing. */
  works(key: string, fields: Record<string, unknown> = {}): void {
    if (this.down.delete(key)) this.log.info(this.recoveredEvent, fields);
  }
}
