/**
 * The least time recent generations of each model took: a lower bound of the next one, whatever
 * the backend (profiled or real). The router escalates a rejected light image only when the time
 * left covers its heavy model's floor; before any generation of a model is seen, the floor is 0.
 */
export class GenerationFloor {
  /** Per model: its last `window` execution times (a ring) and where the next one goes. */
  private readonly recent = new Map<string, { times: number[]; next: number }>();

  constructor(private readonly window = 32) {}

  /** Records one generation's execution time. */
  observe(model: string, execMs: number): void {
    if (!Number.isFinite(execMs) || execMs < 0) return;
    let ring = this.recent.get(model);
    if (!ring) this.recent.set(model, (ring = { times: [], next: 0 }));
    ring.times[ring.next] = execMs;
    ring.next = (ring.next + 1) % this.window;
  }

  /** The least execution time among the model's last `window` generations, 0 when none was seen. */
  floorMs(model: string): number {
    const ring = this.recent.get(model);
    return ring ? Math.min(...ring.times) : 0;
  }
}
