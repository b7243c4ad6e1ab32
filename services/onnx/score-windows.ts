/** Each model's recent judge scores, and thresholds as quantiles of them. */
import { quantileSorted, sortedCopy } from "../../actors/profile/stats.ts";

/** Bounded windows of recent scores, one per model. */
export class ScoreWindows {
  private readonly windows = new Map<string, { scores: Float64Array; next: number; count: number }>();

  constructor(private readonly size: number) {}

  record(model: string, score: number): void {
    let window = this.windows.get(model);
    if (!window) {
      window = { scores: new Float64Array(this.size), next: 0, count: 0 };
      this.windows.set(model, window);
    }
    window.scores[window.next] = score;
    window.next = (window.next + 1) % this.size;
    window.count = Math.min(window.count + 1, this.size);
  }

  /** The `share` quantile of the model's recent scores; 0 (escalate nothing) before any score. */
  thresholdFor(model: string, share: number): number {
    const window = this.windows.get(model);
    if (!window || window.count === 0) return 0;
    return quantileSorted(sortedCopy(window.scores.subarray(0, window.count)), share);
  }
}
