/**
 * Schemas of the files in `profiles/`: a model's measured costs and the pool the system runs.
 * A new GPU or model is a new file validated by these, not new code.
 */
import { z } from "zod";

/** Batch sizes the planner chooses from. */
export const BATCH_SIZES = [1, 2, 4, 8, 16, 32] as const;

/** A closed range of a setting a model supports. */
const RangeSchema = z
  .strictObject({ min: z.number().finite().nonnegative(), max: z.number().finite().nonnegative() })
  .refine((r) => r.min <= r.max, "min must not exceed max");

/**
 * The per-request generation settings a model supports (data, not code): a request asking for
 * another size, or steps or guidance outside these ranges, is refused at the edge naming them.
 */
export const GenerationRangesSchema = z.strictObject({
  /** Image sizes the model makes, as [width, height] pixels; the first is its usual one. */
  sizes: z.array(z.tuple([z.number().int().positive(), z.number().int().positive()])).min(1),
  /** Denoising steps it runs well with. */
  steps: RangeSchema,
  /** Classifier-free guidance scales it runs well with (turbo and distilled models: about 0 to 1). */
  guidanceScale: RangeSchema,
  /** Whether it takes a negative prompt (a model run without guidance has no use for one). */
  negativePrompt: z.boolean(),
  /**
   * The profile backend scales the profiled latency by asked steps ÷ the profiled `steps`: true for
   * a model whose time goes into its denoiser loop, as a diffusion model's does.
   */
  latencyScalesWithSteps: z.boolean().optional(),
});
/** The settings a model supports. */
export type GenerationRanges = z.infer<typeof GenerationRangesSchema>;

/** One model's profile: latency per batch size (ms at time scale 1), swap costs, quality. */
export const ModelProfileSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/),
    referenceId: z.number().int().nonnegative().optional(),
    referenceName: z.string().optional(),
    displayName: z.string().optional(),
    steps: z.number().int().positive().optional(),
    gpu: z.string().optional(),
    // Positive: a batch that takes no time would be infinite capacity (Infinity in the MILP, which then fails every solve).
    latencyMsByBatch: z.record(z.string().regex(/^\d+$/), z.number().positive()),
    sizeGib: z.number().nonnegative().optional(),
    fidAlone: z.number().positive().optional(),
    loadMs: z.number().nonnegative(),
    unloadMs: z.number().nonnegative(),
    source: z.string().optional(),
    /** The largest batch to plan (workers found bigger ones run only in parts, e.g. out of memory); all of `BATCH_SIZES` when absent. */
    maxBatch: z.number().int().positive().optional(),
    /** The per-request settings it supports; without them, a request giving any is refused for this model. */
    options: GenerationRangesSchema.optional(),
  })
  .refine((p) => !p.options?.latencyScalesWithSteps || p.steps !== undefined, {
    message: "options.latencyScalesWithSteps needs the profiled steps (steps)",
    path: ["options", "latencyScalesWithSteps"],
  });
/** A model profile. */
export type ModelProfile = z.infer<typeof ModelProfileSchema>;

/** The pool: which models, the judge's cost, the default SLO. */
export const PoolProfileSchema = z.object({
  name: z.string(),
  description: z.string().optional(),
  models: z.array(z.string()).min(1),
  judge: z.object({ name: z.string(), latencyMs: z.number().nonnegative(), source: z.string().optional() }),
  sloMs: z.number().positive(),
  defaultTimeScale: z.number().positive(),
});
/** A pool profile. */
export type PoolProfile = z.infer<typeof PoolProfileSchema>;
