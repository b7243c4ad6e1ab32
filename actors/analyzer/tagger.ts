/**
 * The tokenizer/part-of-speech tagger the analyzer runs on: a small interface, and its
 * implementation on wink-nlp's English lite model (pure JS, no I/O).
 */
import winkNLP from "wink-nlp";
import model from "wink-eng-lite-web-model";

/** Universal POS tag of a token (the tags wink-nlp and spaCy share). */
export type PosTag =
  | "ADJ" | "ADP" | "ADV" | "AUX" | "CCONJ" | "DET" | "INTJ" | "NOUN" | "NUM" | "PART"
  | "PRON" | "PROPN" | "PUNCT" | "SCONJ" | "SYM" | "VERB" | "X" | "SPACE";

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

/** A Tagger on wink-nlp with the English lite web model; build once, reuse (model load ≈ 100 ms). */
export function createWinkTagger(): Tagger {
  // Only the POS tagger: sentence splitting, negation, sentiment and NER are not needed and cost time.
  const nlp = winkNLP(model, ["pos"]);
  const its = nlp.its;
  return {
    tag(text: string): TaggedPrompt {
      const tokens = nlp.readDoc(text).tokens();
      const words = tokens.out(its.normal) as string[];
      const pos = tokens.out(its.pos) as PosTag[];
      const types = tokens.out(its.type) as string[];
      const isPunct = types.map((t, i) => NON_WORD_TYPES.has(t) || pos[i] === "PUNCT" || pos[i] === "SPACE");
      return { words, pos, isPunct };
    },
  };
}
