/**
 * The learned difficulty model: per (light, heavy) pair, a linear model on a prompt's hashed word
 * unigrams and bigrams that predicts how much better the heavy model's images score than the
 * light model's. Data (`profiles/analyzer/difficulty-model.json`), validated here; scoring is a
 * tokenisation, ~20 hash lookups and a sum (about 1–2 µs a prompt).
 */
import { z } from "zod";
import { fnv1a32, hashedNgrams, promptWords } from "./text-features.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

const finite = z.number().refine(Number.isFinite, "must be finite");

/** One pair's model in the file; `weights` is aligned with the file's `columns`. */
const PairModelSchema = z
  .object({
    light: z.string().min(1),
    heavy: z.string().min(1),
    intercept: finite,
    weights: z.array(finite),
    /** Mean and sd of the pair's raw scores over the reference prompts: scores are served z-normalised. */
    scoreMean: finite,
    scoreStd: finite.refine((s) => s > 0, "must be > 0"),
    /** Route this pair by the model (true only where it raised served quality); otherwise the fallback scorer decides. */
    use: z.boolean(),
    /** Out-of-fold z-scores of the reference prompts, in file order (see `crossFit`). */
    crossFitted: z.array(finite).optional(),
  })
  .passthrough();

/** Schema of a difficulty-model file. */
export const DifficultyModelFileSchema = z
  .object({
    version: z.literal(1),
    kind: z.literal("hashed-ngram-linear"),
    hashBits: z.number().int().min(4).max(24),
    ngramOrders: z.array(z.number().int().min(1).max(3)).min(1),
    /** Hashed columns with a weight in some pair, strictly ascending. */
    columns: z.array(z.number().int().nonnegative()),
    pairs: z.array(PairModelSchema).min(1),
    /**
     * The reference prompts the pairs' `crossFitted` scores are for: each scored by the model of
     * the fold that left it out, so a benchmark on those prompts measures the router out of sample.
     */
    crossFit: z
      .object({
        folds: z.number().int().min(2),
        seed: z.number().int(),
        prompts: z.number().int().positive(),
        promptsHash: z.string().regex(/^[0-9a-f]{8}$/),
      })
      .optional(),
    source: z.string(),
  })
  .passthrough()
  .superRefine((f, ctx) => {
    const size = 2 ** f.hashBits;
    for (let i = 0; i < f.columns.length; i++) {
      if (f.columns[i] >= size) ctx.addIssue({ code: "custom", path: ["columns", i], message: `must be below 2^hashBits = ${size}` });
      else if (i > 0 && f.columns[i] <= f.columns[i - 1])
        ctx.addIssue({ code: "custom", path: ["columns", i], message: "columns must be strictly ascending" });
    }
    const seen = new Set<string>();
    f.pairs.forEach((p, i) => {
      if (p.weights.length !== f.columns.length)
        ctx.addIssue({
          code: "custom",
          path: ["pairs", i, "weights"],
          message: `has ${p.weights.length} weights for ${f.columns.length} columns`,
        });
      if (p.crossFitted && p.crossFitted.length !== f.crossFit?.prompts)
        ctx.addIssue({
          code: "custom",
          path: ["pairs", i, "crossFitted"],
          message: f.crossFit ? `has ${p.crossFitted.length} scores for ${f.crossFit.prompts} prompts` : "needs crossFit",
        });
      const key = pairKey(p.light, p.heavy);
      if (seen.has(key)) ctx.addIssue({ code: "custom", path: ["pairs", i], message: `pair ${key} appears twice` });
      seen.add(key);
    });
  });
/** A difficulty-model file as written on disk. */
export type DifficultyModelFile = z.infer<typeof DifficultyModelFileSchema>;

/** One pair's validated model. */
export interface PairDifficultyModel {
  light: string;
  heavy: string;
  intercept: number;
  /** Weight per slot (the file's columns, in order). */
  weights: Float64Array;
  scoreMean: number;
  scoreStd: number;
  use: boolean;
  /** Out-of-fold z-scores of the reference prompts (`DifficultyModel.crossFit`), if the file has them. */
  crossFitted?: Float64Array;
}

/** A validated difficulty model, ready to score. */
export interface DifficultyModel {
  hashBits: number;
  ngramOrders: readonly number[];
  /** Hashed column → slot in every pair's weights; a column not here has weight 0. */
  slotOf: ReadonlyMap<number, number>;
  pairs: ReadonlyMap<string, PairDifficultyModel>;
  /** The reference prompts the pairs' cross-fitted scores are for (count and `promptsHash`). */
  crossFit?: { prompts: number; promptsHash: string };
  source: string;
}

/** Identifies a prompt list (FNV-1a of its lines, 8 hex digits): cross-fitted scores apply to that list only. */
export function promptsHash(prompts: readonly string[]): string {
  return fnv1a32(prompts.join("\n")).toString(16).padStart(8, "0");
}

/** The key of a (light, heavy) pair in a model. */
export function pairKey(light: string, heavy: string): string {
  return `${light}→${heavy}`;
}

/** Validates a parsed difficulty-model file; the error names the field at fault. */
export function parseDifficultyModel(json: unknown): DifficultyModel {
  const parsed = DifficultyModelFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigurationError(`difficulty model: ${issue?.path.join(".") || "file"}: ${issue?.message}`);
  }
  const f = parsed.data;
  return {
    hashBits: f.hashBits,
    ngramOrders: [...f.ngramOrders],
    slotOf: new Map(f.columns.map((c, i) => [c, i])),
    pairs: new Map(
      f.pairs.map((p) => [
        pairKey(p.light, p.heavy),
        {
          light: p.light,
          heavy: p.heavy,
          intercept: p.intercept,
          weights: Float64Array.from(p.weights),
          scoreMean: p.scoreMean,
          scoreStd: p.scoreStd,
          use: p.use,
          ...(p.crossFitted ? { crossFitted: Float64Array.from(p.crossFitted) } : {}),
        },
      ]),
    ),
    ...(f.crossFit ? { crossFit: { prompts: f.crossFit.prompts, promptsHash: f.crossFit.promptsHash } } : {}),
    source: f.source,
  };
}

/** The slots of a prompt's hashed n-grams that carry a weight, and how many n-grams it has in all. */
export interface EncodedPrompt {
  slots: Int32Array;
  /** Distinct hashed n-grams of the prompt (the row's norm divides by its square root). */
  ngrams: number;
}

/** Hashes a prompt's n-grams once; score it under any pair with `pairScore`. */
export function encodePrompt(model: DifficultyModel, prompt: unknown): EncodedPrompt {
  const columns = hashedNgrams(promptWords(prompt), model.hashBits, model.ngramOrders);
  const slots: number[] = [];
  for (const c of columns) {
    const s = model.slotOf.get(c);
    if (s !== undefined) slots.push(s);
  }
  return { slots: Int32Array.from(slots), ngrams: columns.length };
}

/**
 * A prompt's difficulty under one pair, z-normalised over the reference prompts (0 = a typical
 * reference prompt; higher = the heavy model gains more). The raw score is the linear model on
 * the row `ngramRow` builds; an empty prompt scores the intercept.
 */
export function pairScore(pair: PairDifficultyModel, encoded: EncodedPrompt): number {
  let sum = 0;
  for (let j = 0; j < encoded.slots.length; j++) sum += pair.weights[encoded.slots[j]];
  const raw = pair.intercept + (encoded.ngrams > 0 ? sum / Math.sqrt(encoded.ngrams) : 0);
  return (raw - pair.scoreMean) / pair.scoreStd;
}
