/**
 * The least time recent generations of each model took: a lower bound of the next one, whatever
 * the backend (profiled or real). The router escalates a rejected light image only when the time
 * left covers its heavy model's floor; before any generation of a model is seen, the floor is 0.
 */
export class GenerationFloor {
  private readonly recent = new Map<string, number[]>();
  private readonly next = new Map<string, number>();

  constructor(private readonly window = 32) {}

  /** Records one generation's execution time. */
  observe(model: string, execMs: number): void {
    if (!Number.isFinite(execMs) || execMs < 0) return;
    let ring = this.recent.get(model);
    if (!ring) this.recent.set(model, (ring = []));
    const at = this.next.get(model) ?? 0;
    ring[at] = execMs;
    this.next.set(model, (at + 1) % this.window);
  }

  /** The least execution time among the model's last `window` generations, 0 when none was seen. */
  floorMs(model: string): number {
    const ring = this.recent.get(model);
    return ring && ring.length > 0 ? Math.min(...ring) : 0;
  }
}
