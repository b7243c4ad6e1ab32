/**
 * Word lists the prompt analyzer looks tokens up in, and pure parsers that build them from
 * the lexicon files (Brysbaert concreteness ratings, SUBTLEX-US counts, spatial terms).
 */
import { ConfigurationError } from "../../contracts/errors.ts";

/** The lexicons the analyzer needs; every word is lower case. */
export interface AnalyzerLexicons {
  /** Words rated below the abstractness cut (unknown words are not here: they count as concrete). */
  abstractWords: ReadonlySet<string>;
  /** Words at or above the rarity cut; any other word is rare. */
  commonWords: ReadonlySet<string>;
  /** Spatial terms, each a sequence of words (`["in", "front", "of"]`). */
  spatialTerms: readonly (readonly string[])[];
  /** Word → dominant part of speech (Brysbaert `Dom_Pos`); used to correct noun/adjective tags. */
  dominantPos?: ReadonlyMap<string, string>;
}

/** Concreteness (1 = abstract .. 5 = concrete) below which the reference counts a word abstract. */
export const ABSTRACT_BELOW = 2.5;

/**
 * Words from the Brysbaert et al. (2014) CSV (`Word,Bigram,Conc.M,...`) whose mean rating is
 * below `cut`. Bigrams are skipped: the reference rates single tokens.
 */
export function parseAbstractWords(csvText: string, cut: number = ABSTRACT_BELOW): Set<string> {
  const out = new Set<string>();
  const rows = csvText.split(/\r?\n/);
  const header = rows[0].split(",");
  const wordCol = header.indexOf("Word");
  const ratingCol = header.indexOf("Conc.M");
  if (wordCol < 0 || ratingCol < 0) throw new ConfigurationError("concreteness CSV lacks Word or Conc.M column");
  for (let i = 1; i < rows.length; i++) {
    const parts = rows[i].split(",");
    if (parts.length <= ratingCol) continue;
    const word = parts[wordCol].trim().toLowerCase();
    const rating = Number(parts[ratingCol]);
    if (word.includes(" ") || !Number.isFinite(rating)) continue;
    if (rating < cut) out.add(word);
  }
  return out;
}

/** Words whose corpus count is at least `minCount` (counts of case variants are summed). */
export function commonWordsFromCounts(entries: readonly { word: string; count: number }[], minCount: number): Set<string> {
  const byWord = new Map<string, number>();
  for (const { word, count } of entries) {
    const key = word.toLowerCase();
    byWord.set(key, (byWord.get(key) ?? 0) + count);
  }
  const out = new Set<string>();
  for (const [word, count] of byWord) if (count >= minCount) out.add(word);
  return out;
}

/** Spatial terms, one a line; multi-word terms become word sequences. */
export function parseSpatialTerms(text: string): string[][] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim().toLowerCase())
    .filter((l) => l.length > 0 && !l.startsWith("#"))
    .map((l) => l.split(/\s+/));
}

/** Word → dominant part of speech (`Dom_Pos`: Noun, Adjective, Verb, ...) from the Brysbaert CSV. */
export function parseDominantPos(csvText: string): Map<string, string> {
  const out = new Map<string, string>();
  const rows = csvText.split(/\r?\n/);
  const header = rows[0].split(",");
  const wordCol = header.indexOf("Word");
  const posCol = header.indexOf("Dom_Pos");
  if (wordCol < 0 || posCol < 0) throw new ConfigurationError("concreteness CSV lacks Word or Dom_Pos column");
  for (let i = 1; i < rows.length; i++) {
    const parts = rows[i].split(",");
    const word = parts[wordCol]?.trim().toLowerCase();
    const pos = parts[posCol]?.trim();
    if (word && pos && !word.includes(" ") && /^[A-Z][a-z]+$/.test(pos)) out.set(word, pos);
  }
  return out;
}

/** SUBTLEX-US count (of 51 M words) at which a word stops being rare; chosen where agreement with the reference peaks. */
export const COMMON_MIN_COUNT = 350;

/** Per-word corrections of the rarity list: `true` = rare, `false` = common. */
export type RarityOverrides = ReadonlyMap<string, boolean>;

/** Parses `word<TAB>rare|common` lines (`#` starts a comment). */
export function parseRarityOverrides(text: string): Map<string, boolean> {
  const out = new Map<string, boolean>();
  for (const line of text.split(/\r?\n/)) {
    const l = line.trim();
    if (l === "" || l.startsWith("#")) continue;
    const [word, label] = l.split("\t");
    if (label !== "rare" && label !== "common") throw new ConfigurationError(`rarity override "${l}": label must be rare or common`);
    out.set(word.toLowerCase(), label === "rare");
  }
  return out;
}

/** Formats overrides as parsed by `parseRarityOverrides`, sorted by word. */
export function formatRarityOverrides(overrides: RarityOverrides, header: string): string {
  const rows = [...overrides].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([w, rare]) => `${w}\t${rare ? "rare" : "common"}`);
  return `${header
    .split("\n")
    .map((h) => `# ${h}`)
    .join("\n")}\n${rows.join("\n")}\n`;
}

/** The common-word set with overrides applied (a new set; the input is not changed). */
export function applyRarityOverrides(common: ReadonlySet<string>, overrides: RarityOverrides): Set<string> {
  const out = new Set(common);
  for (const [word, rare] of overrides) {
    if (rare) out.delete(word);
    else out.add(word);
  }
  return out;
}
