/**
 * The largest batch each model runs, from workers' heartbeats (`batchCap`: a bigger batch ran only
 * in parts on them, out of memory most likely): what the planner plans at most. The smallest cap
 * reported holds until `holdMs` after its model's last report: a worker that reloads the model
 * forgets its cap, the planner does not at once (it would plan the batch that failed again).
 * Workers report a cap only while the plan's batch is above it, so once the plan is within it the
 * cap lapses `holdMs` later and the bigger batch is tried again: a probe every `holdMs`.
 */
import type { WorkerHeartbeat } from "../../contracts/messages.ts";

export class BatchCaps {
  private readonly caps = new Map<string, { size: number; atMs: number }>();

  constructor(private readonly holdMs = 10 * 60_000) {}

  /** Records a heartbeat received at `nowMs`; true when it lowers (or sets) its model's cap. */
  observe(beat: WorkerHeartbeat, nowMs: number): boolean {
    if (!beat.model || beat.batchCap === undefined) return false;
    const held = this.caps.get(beat.model);
    const live = held !== undefined && nowMs - held.atMs < this.holdMs;
    const size = live ? Math.min(held.size, beat.batchCap) : beat.batchCap;
    this.caps.set(beat.model, { size, atMs: nowMs });
    return !live || size < held.size;
  }

  /** The caps in force at `nowMs`, by model. */
  current(nowMs: number): Map<string, number> {
    for (const [model, c] of this.caps) if (nowMs - c.atMs >= this.holdMs) this.caps.delete(model);
    return new Map([...this.caps].map(([model, c]) => [model, c.size]));
  }
}
