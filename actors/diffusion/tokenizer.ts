/**
 * The CLIP byte-level BPE tokenizer (as `transformers` CLIPTokenizer): clean and lowercase
 * the text, split with CLIP's pre-tokenizer regex, map bytes to unicode, apply merges with
 * an `</w>` end-of-word marker, wrap in bos/eos and pad to a fixed length.
 */
import { ModelExportError } from "../../contracts/errors.ts";

/** CLIP's begin-of-text id in the published vocabulary. */
export const CLIP_BOS_TOKEN = "<|startoftext|>";
/** CLIP's end-of-text token (also the unknown token). */
export const CLIP_EOS_TOKEN = "<|endoftext|>";
/** Sequence length every Stable Diffusion text encoder takes. */
export const CLIP_MAX_LENGTH = 77;
/** The merge count CLIP's slow tokenizer keeps from `merges.txt` (49152 - 256 - 2). */
const CLIP_MAX_MERGES = 49152 - 256 - 2;
/** Longest word whose token ids are cached (an ordinary word is far shorter). */
const MAX_CACHED_WORD = 64;

/** CLIP's pre-tokenizer: special tokens, English contractions, letter runs, single digits, symbol runs. */
const CLIP_SPLIT = /<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+/giu;

/** GPT-2/CLIP byte → printable unicode character table. */
export function bytesToUnicode(): string[] {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const table = new Array<string>(256);
  bs.forEach((b, i) => (table[b] = String.fromCharCode(cs[i])));
  return table;
}

/** Options read from `tokenizer_config.json` (or given directly). */
export interface ClipTokenizerOptions {
  /** Pad token: `<|endoftext|>` for SD 1.x, `!` (id 0) for SD 2.x and SDXL's second encoder. */
  padToken?: string;
  /** Padded length; 77 for every SD text encoder. */
  maxLength?: number;
}

/** A CLIP BPE tokenizer over a `vocab.json` map and `merges.txt` text. */
export class ClipTokenizer {
  readonly bosId: number;
  readonly eosId: number;
  readonly padId: number;
  readonly maxLength: number;
  private readonly vocab: Map<string, number>;
  private readonly ranks = new Map<string, number>();
  private readonly byteTable = bytesToUnicode();
  private readonly cache = new Map<string, number[]>();

  constructor(vocab: Record<string, number>, mergesText: string, options: ClipTokenizerOptions = {}) {
    this.vocab = new Map(Object.entries(vocab));
    const lines = mergesText.split(/\r?\n/);
    let rank = 0;
    for (const line of lines) {
      if (line.startsWith("#version") || line.trim() === "") continue;
      if (rank >= CLIP_MAX_MERGES) break;
      const [a, b] = line.split(" ");
      if (a !== undefined && b !== undefined) this.ranks.set(`${a} ${b}`, rank++);
    }
    this.bosId = this.idOf(CLIP_BOS_TOKEN);
    this.eosId = this.idOf(CLIP_EOS_TOKEN);
    this.padId = this.idOf(options.padToken ?? CLIP_EOS_TOKEN);
    this.maxLength = options.maxLength ?? CLIP_MAX_LENGTH;
  }

  private idOf(token: string): number {
    const id = this.vocab.get(token);
    if (id === undefined) throw new ModelExportError(`tokenizer vocabulary has no token ${JSON.stringify(token)}`);
    return id;
  }

  /** Token ids of `text` without bos, eos or padding; with `limit`, it stops once it has that many. */
  encodeRaw(text: string, limit = Number.POSITIVE_INFINITY): number[] {
    const cleaned = text.normalize("NFC").replace(/\s+/g, " ").trim().toLowerCase();
    const ids: number[] = [];
    for (const match of cleaned.matchAll(CLIP_SPLIT)) {
      const word = match[0];
      if (word === CLIP_BOS_TOKEN || word === CLIP_EOS_TOKEN) {
        ids.push(this.idOf(word));
        continue;
      }
      ids.push(...this.bpeIds(word));
      if (ids.length >= limit) break; // (the rest would be cut: not worth its merges)
    }
    return ids;
  }

  /** `[bos, …tokens, eos]`, truncated so that bos and eos fit in `maxLength`. */
  encode(text: string): number[] {
    const body = this.encodeRaw(text, this.maxLength - 2).slice(0, this.maxLength - 2);
    return [this.bosId, ...body, this.eosId];
  }

  /** `encode(text)` padded with the pad token to exactly `maxLength` ids. */
  encodePadded(text: string): number[] {
    return this.padded(this.encode(text));
  }

  /** Encoded ids (from `encode`) padded with the pad token to exactly `maxLength` ids. */
  padded(ids: readonly number[]): number[] {
    const out = [...ids];
    while (out.length < this.maxLength) out.push(this.padId);
    return out;
  }

  private bpeIds(word: string): number[] {
    const cached = this.cache.get(word);
    if (cached) return cached;
    let mapped = "";
    for (const byte of new TextEncoder().encode(word)) mapped += this.byteTable[byte];
    const pieces = this.bpe(mapped);
    const ids = pieces.map((piece) => this.vocab.get(piece) ?? this.eosId);
    // Words of ordinary length only: a prompt's worth of junk letters is one "word", and 10,000 of
    // those would hold tens of MB (and stop the cache taking the words that recur).
    if (this.cache.size < 10_000 && word.length <= MAX_CACHED_WORD) this.cache.set(word, ids);
    return ids;
  }

  /** Byte-pair merges of one pre-token; the last symbol carries `</w>`. */
  private bpe(token: string): string[] {
    const chars = Array.from(token);
    let word = chars.slice(0, -1).concat(chars[chars.length - 1] + "</w>");
    while (word.length > 1) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i < word.length - 1; i++) {
        const rank = this.ranks.get(`${word[i]} ${word[i + 1]}`);
        if (rank !== undefined && rank < bestRank) {
          bestRank = rank;
          best = i;
        }
      }
      if (best < 0) break;
      const first = word[best];
      const second = word[best + 1];
      const merged: string[] = [];
      for (let i = 0; i < word.length;) {
        if (i < word.length - 1 && word[i] === first && word[i + 1] === second) {
          merged.push(first + second);
          i += 2;
        } else {
          merged.push(word[i]);
          i += 1;
        }
      }
      word = merged;
    }
    return word;
  }
}

/** Reads the pad token from a parsed `tokenizer_config.json` (string or `{content}` form). */
export function padTokenFromConfig(config: unknown): string | undefined {
  if (typeof config !== "object" || config === null) return undefined;
  const pad = (config as Record<string, unknown>).pad_token;
  if (typeof pad === "string") return pad;
  if (typeof pad === "object" && pad !== null && typeof (pad as { content?: unknown }).content === "string") {
    return (pad as { content: string }).content;
  }
  return undefined;
}
