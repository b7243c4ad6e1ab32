/** The prompt analyzer as the router's difficulty scorer, and its live percentile threshold. */
import type { PromptAnalyzer } from "../analyzer/analyzer.ts";
import { SlidingPercentileThreshold } from "../analyzer/threshold.ts";
import type { DifficultyScorer, HardnessThreshold } from "./difficulty.ts";

/** Scores prompts with the analyzer (features computed online from the text). */
export class AnalyzerScorer implements DifficultyScorer {
  constructor(private readonly analyzer: PromptAnalyzer) {}
  score(prompt: string): number {
    return this.analyzer.analyzePrompt(prompt).score;
  }
}

/**
 * The router's threshold over the live prompt mix: a sliding window of the last `capacity`
 * scores, starting from the analyzer's scores of the reference prompts.
 */
export function liveThreshold(analyzer: PromptAnalyzer, referencePrompts: readonly string[], capacity = 10_000): HardnessThreshold {
  const reference = Float64Array.from(referencePrompts, (p) => analyzer.analyzePrompt(p).score);
  return new SlidingPercentileThreshold({ capacity, reference });
}
