/**
 * The tokenizer/part-of-speech tagger the analyzer runs on: a small interface, and its
 * implementation on wink-nlp's English lite model (pure JS, no I/O).
 */
import winkNLP from "wink-nlp";
import model from "wink-eng-lite-web-model";

/** Universal POS tag of a token (the tags wink-nlp and spaCy share). */
export type PosTag =
  | "ADJ"
  | "ADP"
  | "ADV"
  | "AUX"
  | "CCONJ"
  | "DET"
  | "INTJ"
  | "NOUN"
  | "NUM"
  | "PART"
  | "PRON"
  | "PROPN"
  | "PUNCT"
  | "SCONJ"
  | "SYM"
  | "VERB"
  | "X"
  | "SPACE";

/** A tagged prompt: parallel arrays, one entry per token. */
export interface TaggedPrompt {
  /** Lower-cased token text. */
  words: string[];
  pos: PosTag[];
  /** True for punctuation, symbols and other tokens that are not words or numbers. */
  isPunct: boolean[];
}

/** Tokenizes and POS-tags a prompt. */
export interface Tagger {
  tag(text: string): TaggedPrompt;
}

/** Token types wink-nlp emits that the reference (spaCy `is_punct`-style) does not count as words. */
const NON_WORD_TYPES = new Set(["punctuation", "symbol", "emoji", "emoticon", "tabCRLF"]);

/**
 * Words wink-nlp may learn before its model is built afresh. It adds every word it has not seen
 * to the model's own vocabulary, for good (about 130 bytes a word): a stream of prompts of new
 * words (names, typos, random strings) would grow a router's memory without end. 200,000 words
 * is about 26 MB; a rebuild takes about 140 ms, and ordinary prompts teach it few words.
 */
export const MAX_LEARNED_WORDS = 200_000;

/** A wink-nlp tagger, with the count of words it has learned since it was built. */
export interface WinkTagger extends Tagger {
  readonly learnedWords: number;
  /** Times the model was built afresh to forget learned words. */
  readonly rebuilds: number;
}

interface WinkCore {
  features: { lexeme: { list: unknown[]; intrinsicSize: number } };
}

/** A Tagger on wink-nlp with the English lite web model; build once, reuse (model load ≈ 100 ms). */
export function createWinkTagger(opts: { maxLearnedWords?: number } = {}): WinkTagger {
  const maxLearned = opts.maxLearnedWords ?? MAX_LEARNED_WORDS;
  // wink-nlp builds its working model from `core()`: kept here to read how many words it learned.
  let core: WinkCore | null = null;
  const source = model as unknown as { core: () => WinkCore };
  const counted = { ...model, core: () => (core = source.core()) } as unknown as typeof model;
  // Only the POS tagger: sentence splitting, negation, sentiment and NER are not needed and cost time.
  const build = () => winkNLP(counted, ["pos"]);
  let nlp = build();
  let rebuilds = 0;
  const learned = () => (core ? core.features.lexeme.list.length - core.features.lexeme.intrinsicSize : 0);
  return {
    get learnedWords() {
      return learned();
    },
    get rebuilds() {
      return rebuilds;
    },
    tag(text: string): TaggedPrompt {
      if (learned() > maxLearned) {
        nlp = build();
        rebuilds++;
      }
      const its = nlp.its;
      const tokens = nlp.readDoc(text).tokens();
      const words = tokens.out(its.normal) as string[];
      const pos = tokens.out(its.pos) as PosTag[];
      const types = tokens.out(its.type) as string[];
      const isPunct = types.map((t, i) => NON_WORD_TYPES.has(t) || pos[i] === "PUNCT" || pos[i] === "SPACE");
      return { words, pos, isPunct };
    },
  };
}
