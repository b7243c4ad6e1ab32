/**
 * The learned difficulty model as the router's scorer. For a pair the model marks `use` (where it
 * raised served quality), a prompt scores the model's prediction of the heavy model's gain; for
 * any other pair, or without a pair, it scores the fallback scorer (the analyzer). Both are
 * z-normalised over the reference prompts, so the live percentile threshold sees one scale
 * when the plan changes pair. A reference prompt scores its cross-fitted score when the file has
 * them for these prompts (a model never scores a prompt whose quality it learned from, so the
 * simulator and profile-driven benchmarks, which serve the reference prompts, measure it out of
 * sample).
 */
import { encodePrompt, pairKey, pairScore, promptsHash, type DifficultyModel } from "../analyzer/difficulty-model.ts";
import { SlidingPercentileThreshold } from "../analyzer/threshold.ts";
import type { DifficultyScorer, HardnessThreshold, ModelPair } from "./difficulty.ts";

/** Scores prompts with the learned model where it is in use, else with the z-normalised fallback. */
export class LearnedDifficultyScorer implements DifficultyScorer {
  private readonly fallbackMean: number;
  private readonly fallbackStd: number;
  /** Reference prompt (trimmed) → its row in the cross-fitted scores; empty when they do not apply. */
  private readonly crossFitRow = new Map<string, number>();

  /**
   * `referencePrompts` give the fallback's mean and sd (the learned pairs carry their own, from
   * the same prompts).
   */
  constructor(
    readonly model: DifficultyModel,
    private readonly fallback: DifficultyScorer,
    referencePrompts: readonly string[],
  ) {
    let sum = 0;
    let sumSq = 0;
    for (const p of referencePrompts) {
      const s = fallback.score(p);
      sum += s;
      sumSq += s * s;
    }
    const n = Math.max(1, referencePrompts.length);
    this.fallbackMean = sum / n;
    const std = Math.sqrt(Math.max(0, sumSq / n - this.fallbackMean ** 2));
    this.fallbackStd = std > 0 ? std : 1;
    const cf = model.crossFit;
    if (cf && cf.prompts === referencePrompts.length && cf.promptsHash === promptsHash(referencePrompts))
      referencePrompts.forEach((p, i) => {
        const key = p.trim();
        if (!this.crossFitRow.has(key)) this.crossFitRow.set(key, i);
      });
  }

  /** True when reference prompts score their cross-fitted scores (the file has them for these prompts). */
  get crossFitted(): boolean {
    return this.crossFitRow.size > 0;
  }

  /** True when `pair` is routed by the learned model (not the fallback). */
  usesModel(pair: ModelPair | undefined): boolean {
    return pair !== undefined && this.model.pairs.get(pairKey(pair.light, pair.heavy))?.use === true;
  }

  score(prompt: string, pair?: ModelPair): number {
    const learned = pair ? this.model.pairs.get(pairKey(pair.light, pair.heavy)) : undefined;
    let score: number;
    if (!learned?.use) score = (this.fallback.score(prompt) - this.fallbackMean) / this.fallbackStd;
    else {
      const row = learned.crossFitted ? this.crossFitRow.get(prompt.trim()) : undefined;
      score = row !== undefined ? learned.crossFitted![row] : pairScore(learned, encodePrompt(this.model, prompt));
    }
    return Number.isFinite(score) ? score : 0;
  }
}

/**
 * The router's live threshold for the learned scorer: a sliding window of the last `capacity`
 * scores, starting from the reference prompts' scores under every pair in use among `models`
 * (the pool's; default any), or the fallback's when none is: all on the same z scale.
 */
export function learnedLiveThreshold(
  scorer: LearnedDifficultyScorer,
  referencePrompts: readonly string[],
  capacity = 10_000,
  models?: readonly string[],
): HardnessThreshold {
  const inPool = (m: string) => !models || models.includes(m);
  const used = [...scorer.model.pairs.values()].filter((p) => p.use && inPool(p.light) && inPool(p.heavy));
  const reference: number[] = [];
  for (const pair of used.length > 0 ? used : [undefined]) for (const p of referencePrompts) reference.push(scorer.score(p, pair));
  return new SlidingPercentileThreshold({ capacity, reference });
}
