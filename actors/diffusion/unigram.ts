/**
 * A SentencePiece Unigram tokenizer read from a Hugging Face `tokenizer.json` (T5's, SD3's third
 * text encoder): NFKC normalisation, words split on whitespace and each prefixed with `▁`, each
 * word cut into the pieces of highest total score (Viterbi), unknown characters as one `<unk>`
 * per run, then `</s>`, padded with `<pad>`. T5's own normaliser is a precompiled character map
 * close to NFKC; a prompt it maps differently (rare control or compatibility characters) may
 * tokenize differently from the reference.
 */
import { ModelExportError } from "../../contracts/errors.ts";

/** The `▁` that stands for a space in SentencePiece pieces. */
export const METASPACE = "\u2581";
/** Below the lowest piece score, as Hugging Face's Unigram scores an unknown character. */
const UNK_PENALTY = 10;

/** What a Unigram tokenizer needs: pieces with their scores (log probabilities), in id order. */
export interface UnigramOptions {
  /** Id of `<unk>`. */
  unkId: number;
  /** Id of `</s>`, appended to every encoding. */
  eosId: number;
  /** Id of `<pad>`. */
  padId: number;
  /** Padded length (SD3 reads 256 T5 tokens). */
  maxLength: number;
}

/** A Unigram tokenizer over `[piece, score]` pairs (id = index). */
export class UnigramTokenizer {
  readonly maxLength: number;
  private readonly ids = new Map<string, number>();
  private readonly scores: number[];
  private readonly unkScore: number;
  /** The longest piece, in UTF-16 code units: no candidate is longer. */
  private readonly longest: number;

  constructor(
    vocab: readonly (readonly [string, number])[],
    private readonly opts: UnigramOptions,
  ) {
    this.scores = vocab.map(([, score]) => score);
    vocab.forEach(([piece], id) => {
      if (!this.ids.has(piece)) this.ids.set(piece, id);
    });
    for (const [name, id] of [
      ["unkId", opts.unkId],
      ["eosId", opts.eosId],
      ["padId", opts.padId],
    ] as const) {
      if (!Number.isInteger(id) || id < 0 || id >= vocab.length)
        throw new ModelExportError(`unigram tokenizer: ${name} ${id} is not in the vocabulary of ${vocab.length}`);
    }
    this.unkScore = Math.min(...this.scores) - UNK_PENALTY;
    this.longest = vocab.reduce((n, [piece]) => Math.max(n, piece.length), 1);
    this.maxLength = opts.maxLength;
  }

  /** Piece ids of one pre-tokenized word (`▁` first): the segmentation of highest total score. */
  private word(word: string): number[] {
    const chars = Array.from(word);
    // Offsets of each code point in UTF-16 units, for substring lookups.
    const at = [0];
    for (const c of chars) at.push(at[at.length - 1] + c.length);
    const n = chars.length;
    const best = new Float64Array(n + 1).fill(-Infinity);
    const from = new Int32Array(n + 1).fill(-1);
    const piece = new Int32Array(n + 1).fill(-1);
    best[0] = 0;
    for (let end = 1; end <= n; end++) {
      // Earlier starts first, a strictly better score wins: ties go to the longer piece, as Hugging Face's lattice.
      for (let start = 0; start < end; start++) {
        if (best[start] === -Infinity || at[end] - at[start] > this.longest) continue;
        const id = this.ids.get(word.slice(at[start], at[end]));
        let score: number;
        let pid: number;
        if (id !== undefined) [score, pid] = [this.scores[id], id];
        else if (end - start === 1) [score, pid] = [this.unkScore, this.opts.unkId];
        else continue;
        if (best[start] + score > best[end]) {
          best[end] = best[start] + score;
          from[end] = start;
          piece[end] = pid;
        }
      }
    }
    const out: number[] = [];
    for (let end = n; end > 0; end = from[end]) out.push(piece[end]);
    out.reverse();
    // Runs of unknown characters become one <unk> (Hugging Face's fuse_unk).
    return out.filter((id, i) => id !== this.opts.unkId || out[i - 1] !== this.opts.unkId);
  }

  /** Piece ids of `text`, then `</s>`, truncated so that `</s>` fits in `maxLength`. */
  encode(text: string): number[] {
    const ids: number[] = [];
    for (const w of text.normalize("NFKC").split(/\s+/)) {
      if (w === "") continue;
      ids.push(...this.word(METASPACE + w));
      if (ids.length >= this.maxLength) break;
    }
    return [...ids.slice(0, this.maxLength - 1), this.opts.eosId];
  }

  /** Encoded ids padded with `<pad>` to exactly `maxLength`. */
  padded(ids: readonly number[]): number[] {
    const out = [...ids];
    while (out.length < this.maxLength) out.push(this.opts.padId);
    return out;
  }
}

/**
 * The Unigram tokenizer of a parsed `tokenizer.json` (`model.type` "Unigram", `model.vocab`
 * `[piece, score]` pairs, `model.unk_id`), `</s>` and `<pad>` looked up by name.
 */
export function unigramFromJson(json: unknown, maxLength: number, names: { eos?: string; pad?: string } = {}): UnigramTokenizer {
  const model = (json as { model?: { type?: unknown; vocab?: unknown; unk_id?: unknown } } | null)?.model;
  if (model?.type !== "Unigram")
    throw new ModelExportError(`model type ${JSON.stringify(model?.type)}; only a Unigram (SentencePiece, T5) tokenizer is read here`);
  const vocab = model.vocab;
  if (!Array.isArray(vocab) || !vocab.every((v) => Array.isArray(v) && typeof v[0] === "string" && typeof v[1] === "number")) {
    throw new ModelExportError("model.vocab must be [piece, score] pairs");
  }
  const pairs = vocab as [string, number][];
  const idOf = (name: string) => {
    const id = pairs.findIndex(([p]) => p === name);
    if (id < 0) throw new ModelExportError(`no ${JSON.stringify(name)} piece`);
    return id;
  };
  const unkId = typeof model.unk_id === "number" ? model.unk_id : idOf("<unk>");
  return new UnigramTokenizer(pairs, { unkId, eosId: idOf(names.eos ?? "</s>"), padId: idOf(names.pad ?? "<pad>"), maxLength });
}
