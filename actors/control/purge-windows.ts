/**
 * Which queued items of a model without workers may be purged: those that have sat there a whole
 * window at least. A window starts when the model loses its workers (the work stream's next
 * sequence then marks its end) and again each time one ends; at its end, what was queued before it
 * began is purged. A request queued since (nowhere else to go) waits for workers to come back
 * rather than being dropped under its caller. Pure: time and sequences are passed in.
 */
export class PurgeWindows {
  private readonly windows = new Map<string, { sinceMs: number; beforeSeq: number }>();

  constructor(private readonly windowMs: number) {}

  /**
   * At `nowMs`, with `idle` the models the plan gives no workers: the windows that have ended
   * (purge each model below `beforeSeq`), and the idle models whose next window starts now
   * (`open` them with the stream's last sequence). Models no longer idle are forgotten.
   */
  due(idle: readonly string[], nowMs: number): { ended: { model: string; beforeSeq: number; sinceMs: number }[]; starting: string[] } {
    const idleSet = new Set(idle);
    for (const model of this.windows.keys()) if (!idleSet.has(model)) this.windows.delete(model);
    const ended: { model: string; beforeSeq: number; sinceMs: number }[] = [];
    const starting: string[] = [];
    for (const model of idle) {
      const window = this.windows.get(model);
      if (window && nowMs - window.sinceMs < this.windowMs) continue;
      if (window) ended.push({ model, ...window });
      starting.push(model);
    }
    return { ended, starting };
  }

  /** Starts the windows of `models` at `nowMs`: items up to `lastSeq` were queued before them. */
  open(models: readonly string[], lastSeq: number, nowMs: number): void {
    for (const model of models) this.windows.set(model, { sinceMs: nowMs, beforeSeq: lastSeq + 1 });
  }
}
