/** The live worker inventory, from heartbeats: a worker silent for too long is gone. */
import type { Plan, WorkerHeartbeat } from "../../contracts/messages.ts";

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
    this.workers.set(beat.workerId, { id: beat.workerId, model: beat.model, state: beat.state, lastSeenMs: nowMs, swapsTotal: beat.swapsTotal });
  }

  /** Workers heard from within `silentAfterMs`, sorted by id; older ones are dropped. */
  live(nowMs: number, silentAfterMs: number): KnownWorker[] {
    for (const [id, w] of this.workers) if (nowMs - w.lastSeenMs > silentAfterMs) this.workers.delete(id);
    return [...this.workers.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
}

/**
 * Workers the plan in force assigns when none of them (nor any other) is heard from: the manager
 * missed their heartbeats (an event-loop stall, a reconnect) or the whole fleet is down. A plan
 * made now would unload every worker still there, so the plan in force stays: 0 means plan as usual.
 */
export function unheardFleet(alive: readonly KnownWorker[], current: Plan | null): number {
  return alive.length === 0 ? Object.keys(current?.assignment ?? {}).length : 0;
}
