/**
 * The artifact controller's load signals, sampled once a tick (1 s): the demand it plans with
 * (1.05 × an EWMA of the queries in flight) and, per model, EWMAs of the queue length and of the
 * queries its workers took in. Follows `hadis/src/controller/controller.py` (computeSystemEWMA).
 */

/** `pandas.DataFrame.ewm(halflife=3, adjust=False).mean()` over the last 20 samples, as the controller computes it each tick. */
export class WindowedEwma {
  private readonly samples: number[];
  private readonly alpha: number;

  /**
   * @param initial samples the history starts with (the controller's per-model lists start at `[0]`)
   * @param halfLifeSteps half-life in samples (3)
   * @param window samples kept (20)
   */
  constructor(
    initial: number[] = [],
    halfLifeSteps = 3,
    private readonly window = 20,
  ) {
    this.samples = [...initial];
    this.alpha = 1 - Math.pow(2, -1 / halfLifeSteps);
  }

  /** Appends a sample (the oldest falls out past the window) and returns the new average. */
  push(sample: number): number {
    this.samples.push(sample);
    if (this.samples.length > this.window) this.samples.shift();
    return this.value;
  }

  /** The average of the kept samples, recomputed from the oldest (0 without samples). */
  get value(): number {
    if (this.samples.length === 0) return 0;
    let y = this.samples[0];
    for (let i = 1; i < this.samples.length; i++) y = (1 - this.alpha) * y + this.alpha * this.samples[i];
    return y;
  }
}

/** The controller's over-provisioning factor on demand. */
export const OVER_PROVISION = 1.05;

/** What the controller observes at one tick. */
export interface TickSample {
  /** Queries started and not yet answered or given up (as the controller knows them). */
  inFlight: number;
  /** Per model: queries its workers took in since the last tick. */
  arrivals: Record<string, number>;
  /** Per model: queries waiting in its workers' queues. */
  queued: Record<string, number>;
}

/** The signals the artifact's planners read. */
export interface ArtifactSignals {
  /** 1.05 × EWMA of queries in flight (0 before the first query). */
  demand: number;
  /** Per model: EWMA of queue length. */
  queueLength: Record<string, number>;
  /** Per model: EWMA of queries taken in per tick (a rate per second at 1 s ticks). */
  arrivals: Record<string, number>;
}

/**
 * The controller's signal state. A tick whose in-flight count is 0 changes nothing (the
 * controller updates its EWMAs only when `total_system_demand > 0`), so the demand, once up,
 * never returns to 0.
 */
export class SignalTracker {
  private readonly system = new WindowedEwma();
  private readonly queue = new Map<string, WindowedEwma>();
  private readonly load = new Map<string, WindowedEwma>();
  private current: ArtifactSignals;

  constructor(private readonly models: readonly string[]) {
    for (const m of models) {
      this.queue.set(m, new WindowedEwma([0]));
      this.load.set(m, new WindowedEwma([0]));
    }
    this.current = {
      demand: 0,
      queueLength: Object.fromEntries(models.map((m) => [m, 0])),
      arrivals: Object.fromEntries(models.map((m) => [m, 0])),
    };
  }

  /** Folds in one tick's sample and returns the signals the planners now read. */
  tick(sample: TickSample): ArtifactSignals {
    const total = sample.inFlight * OVER_PROVISION;
    if (total <= 0) return this.current;
    const queueLength: Record<string, number> = {};
    const arrivals: Record<string, number> = {};
    for (const m of this.models) {
      queueLength[m] = this.queue.get(m)!.push(sample.queued[m] ?? 0);
      arrivals[m] = this.load.get(m)!.push(sample.arrivals[m] ?? 0);
    }
    this.current = { demand: this.system.push(total), queueLength, arrivals };
    return this.current;
  }

  /** The signals as of the last tick that saw demand. */
  get signals(): ArtifactSignals {
    return this.current;
  }
}
