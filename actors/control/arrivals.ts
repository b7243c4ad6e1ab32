/**
 * Demand from the routers' reports: each router counts its arrivals over intervals of its own
 * (about a second) and reports them. A tick's sample is, per router, its arrivals over the time
 * its reports since the last tick cover, or its last rate when none came (a tick 200 ms after the
 * previous one, on a new worker's heartbeat); dividing by the manager's own window instead read
 * 0 or several times the rate on such short ticks, and alternated 0 and twice the rate when ticks
 * were shorter than the routers' interval.
 */
interface RouterRate {
  arrivals: number;
  coveredMs: number;
  qps: number;
  lastHeardMs: number;
}

/** Arrival rate over the routers heard from. */
export class ArrivalRate {
  private readonly routers = new Map<string, RouterRate>();

  /** A router's report: `arrivals` over its last `intervalMs`. */
  report(routerId: string, arrivals: number, intervalMs: number, nowMs: number): void {
    const r = this.routers.get(routerId) ?? { arrivals: 0, coveredMs: 0, qps: 0, lastHeardMs: nowMs };
    r.arrivals += arrivals;
    r.coveredMs += intervalMs;
    r.lastHeardMs = nowMs;
    this.routers.set(routerId, r);
  }

  /** Arrivals per second now, summed over the routers heard from within `silentAfterMs`, and how many they are. */
  sample(nowMs: number, silentAfterMs: number): { qps: number; routers: number } {
    let qps = 0;
    for (const [id, r] of this.routers) {
      if (nowMs - r.lastHeardMs > silentAfterMs) {
        this.routers.delete(id);
        continue;
      }
      if (r.coveredMs > 0) {
        r.qps = r.arrivals / (r.coveredMs / 1_000);
        r.arrivals = 0;
        r.coveredMs = 0;
      }
      qps += r.qps;
    }
    return { qps, routers: this.routers.size };
  }
}
