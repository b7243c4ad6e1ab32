/** The live worker inventory, from heartbeats: a worker silent for too long is gone. */
import type { WorkerHeartbeat } from "../../contracts/messages.ts";

/** A worker as the resource manager knows it. */
export interface KnownWorker {
  id: string;
  model: string | null;
  state: WorkerHeartbeat["state"];
  lastSeenMs: number;
  swapsTotal: number;
}

/** Heartbeats in, live workers out. */
export class WorkerInventory {
  private readonly workers = new Map<string, KnownWorker>();

  /** Records a heartbeat received at `nowMs`; a draining worker is leaving and is forgotten. */
  observe(beat: WorkerHeartbeat, nowMs: number): void {
    if (beat.state === "draining") {
      this.workers.delete(beat.workerId);
      return;
    }
    this.workers.set(beat.workerId, {
      id: beat.workerId,
      model: beat.model,
      state: beat.state,
      lastSeenMs: nowMs,
      swapsTotal: beat.swapsTotal,
    });
  }

  /** Workers heard from within `silentAfterMs`, sorted by id; older ones are dropped. */
  live(nowMs: number, silentAfterMs: number): KnownWorker[] {
    for (const [id, w] of this.workers) if (nowMs - w.lastSeenMs > silentAfterMs) this.workers.delete(id);
    return [...this.workers.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
}
