/**
 * What the planner sees each control tick: demand, queues, the live worker inventory and
 * the plan in force. Built by the resource manager; the planner itself is pure.
 */
import type { Plan } from "../../contracts/messages.ts";
import type { ArtifactSignals } from "../artifact/signals.ts";

/** One live worker as the planner sees it: its id and the model it holds (null = none loaded). */
export interface WorkerInventoryItem {
  id: string;
  model: string | null;
}

/** How many workers hold each model now (a worker holding none is not counted). */
export function holdingCounts(workers: readonly WorkerInventoryItem[]): Record<string, number> {
  const holding: Record<string, number> = {};
  for (const w of workers) if (w.model) holding[w.model] = (holding[w.model] ?? 0) + 1;
  return holding;
}

/** The planner's input for one control tick. */
export interface PlannerSnapshot {
  /** Wall-clock time of the snapshot, ms. */
  nowMs: number;
  /** Demand, requests per second (EWMA of arrivals). */
  demandQps: number;
  /** Work items waiting per model queue. */
  queueDepth: Record<string, number>;
  /** Expected wait in each model queue, ms (see `queueDelayMs`). */
  queueDelayMs: Record<string, number>;
  /** Live workers (heartbeating), whatever they hold. */
  workers: WorkerInventoryItem[];
  /** The plan in force, null before the first one. */
  current: Plan | null;
  /** The demand the previous control tick read, requests per second (absent on the first). */
  previousDemandQps?: number;
  /** Latency objective per request, ms (already scaled by the time scale). */
  sloMs: number;
  /** Profile time scale: profiled latencies are multiplied by it. */
  timeScale: number;
  /** The artifact controller's signals (its planners' queue and arrival EWMAs), when they are tracked. */
  signals?: ArtifactSignals;
  /**
   * Each worker has a queue of its own that work is dealt to at random (the artifact's
   * `dispatch`), instead of one queue per model that idle workers pull from.
   */
  perWorkerQueues?: boolean;
}

/** The safety factor on the Little's-law queue wait the manager tells the planner. */
export const QUEUE_SAFETY = 1.5;

/**
 * Expected queueing delay by Little's law, W = L / λ, times a safety factor, in ms.
 * The arrival rate is floored at `minQps` so a queue with leftovers but no arrivals yields
 * a finite (large) delay instead of infinity.
 */
export function queueDelayMs(depth: number, arrivalQps: number, safety = 1, minQps = 0.1): number {
  if (!(depth > 0)) return 0;
  const rate = Math.max(arrivalQps, minQps);
  return (depth / rate) * 1000 * safety;
}

/**
 * Exponentially weighted moving average with a half-life in ms; time is passed in.
 * The first sample sets the value; later samples weigh by 1 − 2^(−Δt / halfLife).
 */
export class Ewma {
  private current: number | undefined;
  private lastMs: number | undefined;

  /** @param halfLifeMs time after which an old value's weight has halved, ms. */
  constructor(private readonly halfLifeMs: number) {
    if (!(halfLifeMs > 0)) throw new RangeError("Ewma half-life must be positive");
  }

  /** Folds in a sample observed at `atMs` and returns the new average. */
  update(sample: number, atMs: number): number {
    // A sample that is not a finite number would stay in the average for good.
    if (!Number.isFinite(sample) || !Number.isFinite(atMs)) return this.value;
    if (this.current === undefined || this.lastMs === undefined) {
      this.current = sample;
      this.lastMs = atMs;
      return sample;
    }
    const dt = Math.max(0, atMs - this.lastMs);
    const alpha = 1 - Math.pow(2, -dt / this.halfLifeMs);
    this.current += alpha * (sample - this.current);
    this.lastMs = Math.max(this.lastMs, atMs);
    return this.current;
  }

  /** The average so far (0 before any sample). */
  get value(): number {
    return this.current ?? 0;
  }
}
