/**
 * The router's difficulty scorer and threshold by name, for the live router and the simulator
 * alike: `analyzer` (the reference weights on features computed from the text), `reference` (the
 * artifact's precomputed features of the reference prompts) or `learned` (the learned per-pair
 * model where it raises served quality, the analyzer elsewhere).
 */
import { join } from "node:path";
import type { PromptAnalyzer } from "../../actors/analyzer/analyzer.ts";
import type { ProfileSet } from "../../actors/profile/profile-set.ts";
import { AnalyzerScorer, liveThreshold } from "../../actors/routing/analyzer-scorer.ts";
import {
  FixedPercentileThreshold,
  ReferenceFeatureScorer,
  type DifficultyScorer,
  type HardnessThreshold,
} from "../../actors/routing/difficulty.ts";
import { LearnedDifficultyScorer, learnedLiveThreshold } from "../../actors/routing/learned-scorer.ts";
import { ANALYZER_PATHS, loadDifficultyModel, loadPromptAnalyzer } from "./analyzer-files.ts";
import { DEFAULT_PROFILES_DIR } from "./profiles.ts";

import { type ScorerKind } from "./scorer-kinds.ts";

export { defaultScorerFor, SCORER_KINDS, type ScorerKind } from "./scorer-kinds.ts";

/** Where the scorers' data comes from (defaults: the profiles folder's files). */
export interface ScorerFiles {
  profilesDir?: string;
  /** Router-weights file of the analyzer (and of the learned scorer's fallback). */
  weightsPath?: string;
  /** Learned difficulty-model file (default `<profiles>/analyzer/difficulty-model.json`). */
  difficultyModelPath?: string;
  /** An analyzer already built (the simulator's memoised one); else one is loaded from the files. */
  analyzer?: PromptAnalyzer;
}

/** A scorer and a fresh threshold for it (thresholds keep state: one per router or simulated run). */
export function routerScoring(
  kind: ScorerKind,
  profiles: ProfileSet,
  files: ScorerFiles = {},
): { scorer: DifficultyScorer; threshold: HardnessThreshold } {
  if (kind === "reference") {
    const scorer = new ReferenceFeatureScorer(profiles);
    return { scorer, threshold: new FixedPercentileThreshold(scorer.referenceScores) };
  }
  // Lexicons and weights from the same profiles folder as the reference prompts.
  const analyzer =
    files.analyzer ??
    loadPromptAnalyzer({
      ...(files.profilesDir ? { profilesDir: files.profilesDir } : {}),
      ...(files.weightsPath ? { weightsPath: files.weightsPath } : {}),
    });
  if (kind === "analyzer") return { scorer: new AnalyzerScorer(analyzer), threshold: liveThreshold(analyzer, profiles.reference.prompts) };
  const model = loadDifficultyModel(
    files.difficultyModelPath ?? join(files.profilesDir ?? DEFAULT_PROFILES_DIR, ANALYZER_PATHS.difficultyModel),
  );
  const scorer = new LearnedDifficultyScorer(model, new AnalyzerScorer(analyzer), profiles.reference.prompts);
  return {
    scorer,
    threshold: learnedLiveThreshold(
      scorer,
      profiles.reference.prompts,
      undefined,
      profiles.models.map((m) => m.name),
    ),
  };
}
