/**
 * The artifact controller's load signals in the live manager: each router's latest in-flight
 * count and the items it queued per model (from its stats), sampled once a second with the queue
 * depths into the artifact's EWMAs (`actors/artifact/signals.ts`).
 */
import type { RouterStats } from "../../contracts/messages.ts";
import { SignalTracker, type ArtifactSignals } from "../../actors/artifact/signals.ts";

/** The signals one manager keeps. */
export class LiveArtifactSignals {
  private readonly tracker: SignalTracker;
  private readonly inFlight = new Map<string, { count: number; atMs: number }>();
  private enqueued = new Map<string, number>();

  constructor(models: readonly string[]) {
    this.tracker = new SignalTracker(models);
  }

  /** A router's report: its requests in flight now, and what it queued per model since its last. */
  report(stats: RouterStats, nowMs: number): void {
    this.inFlight.set(stats.routerId, { count: stats.inFlight, atMs: nowMs });
    for (const [model, n] of Object.entries(stats.enqueued ?? {})) this.enqueued.set(model, (this.enqueued.get(model) ?? 0) + n);
  }

  /** One controller tick: the in-flight count of the routers heard within `silentAfterMs`, the intake since the last tick, and `queued` now. */
  sample(queued: Record<string, number>, nowMs: number, silentAfterMs: number): ArtifactSignals {
    let inFlight = 0;
    for (const [id, r] of this.inFlight) {
      if (nowMs - r.atMs > silentAfterMs) this.inFlight.delete(id);
      else inFlight += r.count;
    }
    const arrivals = Object.fromEntries(this.enqueued);
    this.enqueued = new Map();
    return this.tracker.tick({ inFlight, arrivals, queued });
  }

  /** The signals as of the last tick. */
  get current(): ArtifactSignals {
    return this.tracker.signals;
  }
}
