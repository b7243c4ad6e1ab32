/**
 * The reference router's eight prompt features computed from a tagged prompt. The reference
 * used spaCy's dependency parse; wink-nlp has none, so subjects and objects are found with
 * part-of-speech patterns (see `countObjects`).
 */
import type { FeatureName } from "../profile/reference.ts";
import type { AnalyzerLexicons } from "./lexicons.ts";
import { POSSESSIVES } from "./retag.ts";
import type { TaggedPrompt } from "./tagger.ts";

/** The eight features of one prompt, named as in FEATURE_NAMES. */
export type PromptFeatures = Record<FeatureName, number>;

/** Computes all eight features. */
export function extractFeatures(t: TaggedPrompt, lex: AnalyzerLexicons): PromptFeatures {
  let promptLength = 0;
  let tokenRarity = 0;
  let abstractness = 0;
  let attributeDensity = 0;
  let actionVerbs = 0;
  const n = t.words.length;
  for (let i = 0; i < n; i++) {
    if (t.isPunct[i]) continue;
    const w = t.words[i];
    const pos = t.pos[i];
    promptLength++;
    if (isRare(w, lex.commonWords)) tokenRarity++;
    if (lex.abstractWords.has(w)) abstractness++;
    if (pos === "ADJ" || (pos === "VERB" && isAttributiveParticiple(t, i))) attributeDensity++;
    if (pos === "VERB") actionVerbs++;
  }
  return {
    promptLength,
    tokenRarity,
    numObjects: countObjects(t),
    abstractness,
    attributeDensity,
    spatialRelations: countSpatial(t.words, lex.spatialTerms),
    actionVerbs,
    namedEntities: countProperRuns(t),
  };
}

/**
 * The form a word is looked up under in the frequency list: like wordfreq, a clitic loses its
 * apostrophe ("'s" → "s").
 */
export function rarityKey(word: string): string {
  const c = word.charCodeAt(0);
  return c === 39 || c === 0x2019 ? word.slice(1) : word;
}

/** True when a word is rare: its lookup form is not in the common-word set. */
export function isRare(word: string, common: ReadonlySet<string>): boolean {
  return !common.has(rarityKey(word));
}

/** True for a participle before its noun ("a stuffed animal", "a rocking chair"): spaCy's amod. */
export function isAttributiveParticiple(t: TaggedPrompt, i: number): boolean {
  const w = t.words[i];
  if (!(w.endsWith("ing") || w.endsWith("ed")) || t.pos[i + 1] !== "NOUN") return false;
  const prev = t.pos[i - 1];
  return prev === undefined || prev === "DET" || prev === "ADJ" || prev === "ADP" || prev === "CCONJ" || prev === "NUM" || prev === "PUNCT";
}

/** Maximal runs of proper nouns: a stand-in for spaCy's PERSON/ORG/GPE entities (wink-nlp's model has no such NER). */
export function countProperRuns(t: TaggedPrompt): number {
  let count = 0;
  for (let i = 0; i < t.pos.length; i++) if (t.pos[i] === "PROPN" && (i === 0 || t.pos[i - 1] !== "PROPN")) count++;
  return count;
}

/** spaCy's norm exceptions that matter for spatial terms: the reference matched "thru" as "through". */
const SPATIAL_NORMS: ReadonlyMap<string, string> = new Map([["thru", "through"]]);

/**
 * Occurrences of spatial terms as whole-word sequences, words normalised as spaCy does
 * ("thru" → "through"); a multi-word term and its first word both count.
 */
export function countSpatial(words: readonly string[], terms: readonly (readonly string[])[]): number {
  let count = 0;
  for (const term of terms) {
    for (let i = 0; i + term.length <= words.length; i++) {
      let match = true;
      for (let j = 0; j < term.length; j++) {
        const w = words[i + j];
        if ((SPATIAL_NORMS.get(w) ?? w) !== term[j]) {
          match = false;
          break;
        }
      }
      if (match) count++;
    }
  }
  return count;
}

/** Auxiliaries that are not finite (no subject of their own). */
const NON_FINITE_AUX = new Set(["be", "being", "been", "to"]);
/** Pronouns that open a relative clause: they are the subject of the clause's verb. */
const RELATIVE = new Set(["that", "which", "who", "whom", "where"]);

/** True when token i is a finite verb (one that takes an nsubj): an auxiliary or a present-tense verb. */
function isFiniteVerb(t: TaggedPrompt, i: number): boolean {
  const pos = t.pos[i];
  const w = t.words[i];
  if (pos === "AUX") return !NON_FINITE_AUX.has(w);
  if (pos !== "VERB") return false;
  return w.endsWith("s") && !w.endsWith("ss") && !w.endsWith("ing") && !w.endsWith("ed");
}

const BE = new Set(["is", "are", "was", "were", "am", "'s", "'re"]);

/** True when the finite verb at i is a form of "be" opening a passive ("is shown"): its subject is nsubjpass. */
function isPassive(t: TaggedPrompt, i: number): boolean {
  if (!BE.has(t.words[i])) return false;
  let j = i + 1;
  while (j < t.words.length && t.pos[j] === "ADV") j++;
  return j < t.words.length && t.pos[j] === "VERB" && !t.words[j].endsWith("ing");
}

/** "in the wild", "the other": an adjective closing a determiner phrase heads it (spaCy keeps ADJ but parses it as the object). */
function isNominalAdjective(t: TaggedPrompt, i: number): boolean {
  if (t.pos[i] !== "ADJ") return false;
  const prev = t.pos[i - 1];
  const next = t.pos[i + 1];
  return (prev === "DET" || POSSESSIVES.has(t.words[i - 1])) && (next === undefined || next === "ADP" || next === "PUNCT");
}

/** True for a token inside a noun phrase before its nouns: determiner, adjective, number, "red and blue". */
function isPhraseModifier(t: TaggedPrompt, k: number): boolean {
  const p = t.pos[k];
  if (p === "DET" || p === "ADJ" || p === "NUM" || p === "ADV") return true;
  if (p === "VERB") return isAttributiveParticiple(t, k);
  return (p === "CCONJ" || p === "PUNCT") && t.pos[k - 1] === "ADJ";
}

/**
 * Approximates spaCy's nsubj + dobj + pobj count with POS patterns. A noun phrase is a run of
 * nouns/numbers (its head is the last one; a possessive "'s" joins two runs) or one pronoun.
 * pobj: the phrase follows a preposition, dobj: it follows a verb (over determiners and
 * adjectives); nsubj: the first phrase of a clause whose finite verb comes later. A phrase
 * after a conjunction is a conj, and a bare phrase with no finite verb is the root: neither counts.
 */
export function countObjects(t: TaggedPrompt): number {
  const n = t.words.length;
  const { pos, words } = t;
  let count = 0;
  let clauseStart = 0;
  /** Head of the clause's first phrase, -1 if none yet; -2 once the clause's subject is counted. */
  let firstHead = -1;
  let i = 0;
  while (i < n) {
    const p = pos[i];
    if (isFiniteVerb(t, i)) {
      if (firstHead >= 0 && !isPassive(t, i)) count++;
      firstHead = -2;
      i++;
      continue;
    }
    if (p === "PRON" && RELATIVE.has(words[i])) {
      clauseStart = i;
      firstHead = i;
      i++;
      continue;
    }
    const nominal = p === "NOUN" || p === "PROPN" || p === "NUM";
    if (!nominal && p !== "PRON" && !isNominalAdjective(t, i)) {
      i++;
      continue;
    }
    let j = i;
    if (nominal) {
      for (;;) {
        if (j + 1 < n && (pos[j + 1] === "NOUN" || pos[j + 1] === "PROPN" || pos[j + 1] === "NUM")) j++;
        else if (j + 2 < n && pos[j + 1] === "PART" && words[j + 1] === "'s" && (pos[j + 2] === "NOUN" || pos[j + 2] === "PROPN")) j += 2;
        else break;
      }
    }
    let k = i - 1;
    while (k >= clauseStart && isPhraseModifier(t, k)) k--;
    const before = k >= 0 ? pos[k] : undefined;
    if (before === "ADP" || before === "VERB") count++;
    else if (before !== "CCONJ" && firstHead === -1) firstHead = j;
    i = j + 1;
  }
  return count;
}
