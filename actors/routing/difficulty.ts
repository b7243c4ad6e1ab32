/**
 * Prompt difficulty and the router's percentile threshold. A scorer turns a prompt into a
 * difficulty (higher = harder); the threshold says whether it is in the hardest `share`.
 */
import type { ProfileSet } from "../profile/profile-set.ts";
import { referenceIndexFor } from "../profile/profile-set.ts";
import { REFERENCE_WEIGHTS } from "../profile/reference.ts";
import { inTopShare, meanStd, sortedCopy } from "../profile/stats.ts";

/** The (light, heavy) pair a prompt is routed within. */
export interface ModelPair {
  light: string;
  heavy: string;
}

/** Turns a prompt into a difficulty score. */
export interface DifficultyScorer {
  /** `pair`: the plan's pair, for scorers that predict per pair (others ignore it). */
  score(prompt: string, pair?: ModelPair): number;
}

/** Decides whether a score is among the hardest `share` (0..1) of prompts. */
export interface HardnessThreshold {
  /** `tieBreak` in [0, 1) decides among scores tied at the cut (inTopShare); default 0.5. */
  isHard(score: number, share: number, tieBreak?: number): boolean;
  /** Lets a threshold that follows the live mix see every score. */
  observe?(score: number): void;
}

/** z-normalised features · weights. */
export function linearScore(
  features: ArrayLike<number>,
  means: ArrayLike<number>,
  stds: ArrayLike<number>,
  weights: ArrayLike<number>,
): number {
  let s = 0;
  for (let i = 0; i < weights.length; i++) {
    const sd = stds[i] > 0 ? stds[i] : 1;
    s += ((features[i] - means[i]) / sd) * weights[i];
  }
  return s;
}

/**
 * The reference router: the artifact's precomputed features of the 5,000 reference prompts
 * with its weights; unknown prompts take the features of a prompt drawn by their text.
 */
export class ReferenceFeatureScorer implements DifficultyScorer {
  private readonly means: Float64Array;
  private readonly stds: Float64Array;
  /** Scores of all reference prompts, by index. */
  readonly referenceScores: Float64Array;

  constructor(
    private readonly profiles: ProfileSet,
    private readonly weights: ArrayLike<number> = REFERENCE_WEIGHTS,
  ) {
    const f = profiles.reference.features;
    this.means = new Float64Array(8);
    this.stds = new Float64Array(8);
    for (let j = 0; j < 8; j++) {
      const { mean, std } = meanStd(f.map((row) => row[j]));
      this.means[j] = mean;
      this.stds[j] = std;
    }
    this.referenceScores = Float64Array.from(f, (row) => linearScore(row, this.means, this.stds, this.weights));
  }

  score(prompt: string): number {
    return this.referenceScores[referenceIndexFor(this.profiles, prompt).index];
  }
}

/** A percentile threshold over a fixed score distribution (the reference prompts' scores). */
export class FixedPercentileThreshold implements HardnessThreshold {
  private readonly sorted: Float64Array;
  constructor(distribution: ArrayLike<number>) {
    this.sorted = sortedCopy(distribution);
  }
  isHard(score: number, share: number, tieBreak?: number): boolean {
    return inTopShare(this.sorted, this.sorted.length, score, share, tieBreak);
  }
}
