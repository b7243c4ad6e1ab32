/**
 * The pre-generation prompt analyzer: any prompt → the reference router's eight features and
 * its difficulty score, online (tens of microseconds a prompt). Pure: lexicons, score model
 * and tagger are passed in; `services/files/analyzer-files.ts` loads them from disk.
 */
import { extractFeatures, type PromptFeatures } from "./features.ts";
import type { AnalyzerLexicons } from "./lexicons.ts";
import { retag } from "./retag.ts";
import { featureVector, scoreVector, type ScoreModel } from "./score-model.ts";
import { createWinkTagger, type Tagger } from "./tagger.ts";

/** Longest prompt prefix analysed (characters); longer prompts are cut to bound latency. */
export const MAX_PROMPT_CHARS = 4000;

/** The analysis of one prompt. */
export interface PromptAnalysis {
  features: PromptFeatures;
  /** Difficulty score: higher = harder (z-normalised features · weights). Always finite. */
  score: number;
}

/** Scores prompts; build once with `createPromptAnalyzer`, reuse for every request. */
export interface PromptAnalyzer {
  analyzePrompt(prompt: string): PromptAnalysis;
  /** The score model in use (means, stds, weights, source). */
  readonly scoreModel: ScoreModel;
}

const ZERO_FEATURES: Readonly<PromptFeatures> = Object.freeze({
  promptLength: 0,
  tokenRarity: 0,
  numObjects: 0,
  abstractness: 0,
  attributeDensity: 0,
  spatialRelations: 0,
  actionVerbs: 0,
  namedEntities: 0,
});

// C0/C1 control characters, zero-width and bidi marks, variation selectors and tag characters
// (the emoji presentation of "❤️", a flag's subdivision): the tagger reads them as odd tokens, and
// each would count as a rare word.
const CONTROL =
  /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff\u{e0000}-\u{e007f}\u{e0100}-\u{e01ef}]+/gu;

/**
 * Puts a prompt in the form the reference saw: lower case (its captions are lower case and the
 * tag corrections were tuned on that), control characters as spaces, at most MAX_PROMPT_CHARS.
 */
export function normalisePrompt(prompt: unknown): string {
  let text = typeof prompt === "string" ? prompt : prompt == null ? "" : String(prompt);
  if (text.length > MAX_PROMPT_CHARS) {
    let cut = MAX_PROMPT_CHARS;
    const c = text.charCodeAt(cut - 1);
    if (c >= 0xd800 && c <= 0xdbff) cut--; // do not split a surrogate pair
    text = text.slice(0, cut);
  }
  return text.replace(CONTROL, " ").trim().toLowerCase();
}

/** Builds an analyzer. `tagger` defaults to wink-nlp's English lite model. */
export function createPromptAnalyzer(
  lexicons: AnalyzerLexicons,
  scoreModel: ScoreModel,
  tagger: Tagger = createWinkTagger(),
): PromptAnalyzer {
  return {
    scoreModel,
    analyzePrompt(prompt: string): PromptAnalysis {
      const text = normalisePrompt(prompt);
      const features = text === "" ? { ...ZERO_FEATURES } : extractFeatures(retag(tagger.tag(text), lexicons.dominantPos), lexicons);
      const score = scoreVector(featureVector(features), scoreModel);
      return { features, score: Number.isFinite(score) ? score : 0 };
    },
  };
}
