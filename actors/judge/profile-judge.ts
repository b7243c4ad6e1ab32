/**
 * The profile-driven judge: the score of a light image is the measured discriminator score
 * (mean P(real)) of the reference prompt standing for this prompt on this model.
 */
import type { ProfileSet } from "../profile/profile-set.ts";
import { referenceIndexFor } from "../profile/profile-set.ts";
import { quantileSorted } from "../profile/stats.ts";
import type { JudgeBackend, JudgeInput } from "../worker/backend.ts";

/** Options of the profile judge. */
export interface ProfileJudgeOptions {
  /** Waits this long per batch (profiled judge latency × time scale). */
  latencyMs: number;
  sleep: (ms: number) => Promise<void>;
}

/** Judge backend reading quality from the profiled per-prompt scores. */
export class ProfileJudge implements JudgeBackend {
  readonly kind = "profile";
  constructor(
    private readonly profiles: ProfileSet,
    private readonly options: ProfileJudgeOptions,
  ) {}

  async score(batch: readonly JudgeInput[]): Promise<number[]> {
    if (this.options.latencyMs > 0) await this.options.sleep(this.options.latencyMs);
    return batch.map((item) => {
      const scores = this.profiles.reference.scores.get(item.model);
      if (!scores) throw new Error(`no profiled scores for model "${item.model}"`);
      return scores[referenceIndexFor(this.profiles, item.prompt).index];
    });
  }

  thresholdFor(model: string, share: number): number {
    const sorted = this.profiles.reference.sortedScores.get(model);
    if (!sorted || share <= 0) return 0;
    return quantileSorted(sorted, share);
  }

  async close(): Promise<void> {}
}
