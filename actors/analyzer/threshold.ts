/**
 * The router's percentile threshold over recent scores: a prompt is hard when its score is in
 * the top `routerShare` fraction of a bounded sliding window of recent scores. Until the window
 * holds `minSamples` scores it answers from a fixed reference distribution instead.
 */
import { inTopShare, lowerBound, quantileSorted, upperBound } from "../profile/stats.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

/** Options of a SlidingPercentileThreshold. */
export interface SlidingPercentileOptions {
  /** Scores the window keeps (the oldest is evicted first). */
  capacity: number;
  /** Scores needed before the window replaces the reference distribution; default min(capacity, 100). */
  minSamples?: number;
  /** Reference score distribution used until the window is warm (any order; copied). */
  reference: ArrayLike<number>;
}

/**
 * Sliding-window percentile classifier. O(log n) queries, O(capacity) inserts (a memmove of
 * the sorted copy), no allocation after construction. Non-finite scores are ignored.
 */
export class SlidingPercentileThreshold {
  private readonly ring: Float64Array;
  private readonly sorted: Float64Array;
  private readonly reference: Float64Array;
  private readonly minSamples: number;
  private head = 0;
  private count = 0;

  constructor(options: SlidingPercentileOptions) {
    const capacity = Math.floor(options.capacity);
    if (!(capacity >= 1)) throw new ConfigurationError(`capacity must be ≥ 1, got ${options.capacity}`);
    this.ring = new Float64Array(capacity);
    this.sorted = new Float64Array(capacity);
    this.reference = Float64Array.from(Array.from(options.reference as ArrayLike<number>).filter(Number.isFinite)).sort();
    this.minSamples = Math.min(Math.max(1, Math.floor(options.minSamples ?? Math.min(capacity, 100))), capacity);
  }

  /** Scores currently in the window. */
  get size(): number {
    return this.count;
  }

  /** True once the window (not the reference distribution) decides. */
  get warm(): boolean {
    return this.count >= this.minSamples;
  }

  /** Adds a score to the window, evicting the oldest when full. */
  observe(score: number): void {
    if (!Number.isFinite(score)) return;
    const cap = this.ring.length;
    if (this.count === cap) {
      const old = this.ring[this.head];
      const at = lowerBound(this.sorted, this.count, old);
      this.sorted.copyWithin(at, at + 1, this.count);
      this.count--;
    }
    const at = upperBound(this.sorted, this.count, score);
    this.sorted.copyWithin(at + 1, at, this.count);
    this.sorted[at] = score;
    this.count++;
    this.ring[this.head] = score;
    this.head = (this.head + 1) % cap;
  }

  /**
   * True when `score` is in the top `routerShare` fraction of the distribution in force, ties
   * shared by `tieBreak` (inTopShare). routerShare ≤ 0 → never, ≥ 1 → always.
   */
  isHard(score: number, routerShare: number, tieBreak?: number): boolean {
    const [dist, n] = this.warm ? [this.sorted, this.count] : [this.reference, this.reference.length];
    return inTopShare(dist, n, score, routerShare, tieBreak);
  }

  /** Score at the (1 − routerShare) quantile of the distribution in force (for logs and dashboards). */
  threshold(routerShare: number): number {
    const [dist, n] = this.warm ? [this.sorted, this.count] : [this.reference, this.reference.length];
    if (n === 0) return Number.NaN;
    return quantileSorted(dist.subarray(0, n), 1 - routerShare);
  }
}
