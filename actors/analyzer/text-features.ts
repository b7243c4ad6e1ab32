/**
 * Word features of a prompt for the learned difficulty model: its words (lower case, as the
 * analyzer normalises prompts) and their unigrams and bigrams hashed into 2^bits columns, so the
 * model is a weight per column whatever words a prompt brings. Hashing works on each word's hash
 * (no n-gram strings are built): about 1 µs a prompt.
 */
import { normalisePrompt } from "./analyzer.ts";
import type { SparseRow } from "./sparse-linear.ts";

const WORD = /[\p{L}\p{N}]+(?:['’]\p{L}+)*/gu;

/** The words of a prompt: normalised as the analyzer does, then runs of letters and digits (with clitics: "dog's"). */
export function promptWords(prompt: unknown): string[] {
  return normalisePrompt(prompt).match(WORD) ?? [];
}

/** 32-bit FNV-1a hash of a string's UTF-16 code units. */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** MurmurHash3's finaliser: spreads every input bit over the output (so low bits can be masked). */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Stand-ins for the prompt's start and end, so a bigram also says which word opens or closes it. */
const START = fnv1a32("\u0002<s>");
const END = fnv1a32("\u0003</s>");

/**
 * The distinct hashed columns (0..2^bits − 1) of a word list's n-grams for each order in
 * `orders` (1 = unigrams; 2 = bigrams, with the prompt's start and end as words), ascending;
 * none for no words.
 * The order is hashed in, so a unigram and a bigram never share a name.
 */
export function hashedNgrams(words: readonly string[], bits: number, orders: readonly number[]): Int32Array {
  if (!(Number.isInteger(bits) && bits >= 1 && bits <= 30)) throw new Error(`hash bits must be an integer in 1..30, got ${bits}`);
  const n = words.length;
  if (n === 0) return new Int32Array(0);
  const mask = (1 << bits) - 1;
  // Word hashes with the start and end markers around them: slot 0 and n + 1.
  const padded = new Array<number>(n + 2);
  padded[0] = START;
  for (let i = 0; i < n; i++) padded[i + 1] = fnv1a32(words[i]);
  padded[n + 1] = END;
  const columns: number[] = [];
  for (const order of orders) {
    // Unigrams skip the markers; longer n-grams include them.
    const [from, to] = order > 1 ? [0, n + 2] : [1, n + 1];
    for (let i = from; i + order <= to; i++) {
      let h = Math.imul(0x9e3779b1, order + 1);
      for (let j = 0; j < order; j++) h = Math.imul(h ^ padded[i + j], 0x01000193) + 0x7f4a7c15;
      columns.push(fmix32(h) & mask);
    }
  }
  const sorted = Int32Array.from(columns).sort();
  let distinct = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) sorted[distinct++] = sorted[i];
  return sorted.subarray(0, distinct);
}

/**
 * A prompt's hashed n-grams as a sparse row: each present column at 1/√(columns present), so a
 * long prompt weighs no more in all than a short one.
 */
export function ngramRow(words: readonly string[], bits: number, orders: readonly number[]): SparseRow {
  const indices = hashedNgrams(words, bits, orders);
  const value = indices.length > 0 ? 1 / Math.sqrt(indices.length) : 0;
  return { indices, values: new Float64Array(indices.length).fill(value) };
}
