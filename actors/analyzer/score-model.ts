/**
 * The router's difficulty score: z-normalised features dotted with weights. The means, stds
 * and weights are data (`profiles/analyzer/router-weights*.json`), validated here.
 */
import { z } from "zod";
import { FEATURE_NAMES, type FeatureName } from "../profile/reference.ts";
import { meanStd } from "../profile/stats.ts";
import type { PromptFeatures } from "./features.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

const finite = z.number().refine(Number.isFinite, "must be finite");

/** Schema of a router-weights file; arrays are in `featureNames` order. */
export const ScoreModelFileSchema = z
  .object({
    featureNames: z.array(z.enum(FEATURE_NAMES)).length(FEATURE_NAMES.length),
    means: z.array(finite).length(FEATURE_NAMES.length),
    stds: z.array(finite.refine((s) => s >= 0, "must be ≥ 0")).length(FEATURE_NAMES.length),
    weights: z.array(finite).length(FEATURE_NAMES.length),
    /** Log-odds offset of a learned model; absent (0) for the reference weights. */
    intercept: finite.optional(),
    source: z.string(),
  })
  .passthrough()
  .refine((f) => new Set(f.featureNames).size === FEATURE_NAMES.length, "featureNames must name each feature once");
/** A router-weights file as written on disk. */
export type ScoreModelFile = z.infer<typeof ScoreModelFileSchema>;

/** A validated score model with arrays in FEATURE_NAMES order. */
export interface ScoreModel {
  means: Float64Array;
  stds: Float64Array;
  weights: Float64Array;
  intercept: number;
  source: string;
}

/** Validates a parsed router-weights file and reorders it to FEATURE_NAMES order. */
export function parseScoreModel(json: unknown): ScoreModel {
  const parsed = ScoreModelFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigurationError(`router weights: ${issue?.path.join(".") || "file"}: ${issue?.message}`);
  }
  const f = parsed.data;
  const pick = (arr: number[]) => Float64Array.from(FEATURE_NAMES, (name) => arr[f.featureNames.indexOf(name)]);
  return { means: pick(f.means), stds: pick(f.stds), weights: pick(f.weights), intercept: f.intercept ?? 0, source: f.source };
}

/** The on-disk form of a score model (FEATURE_NAMES order). */
export function toScoreModelFile(model: ScoreModel, extra: Record<string, unknown> = {}): ScoreModelFile {
  return {
    featureNames: [...FEATURE_NAMES],
    means: [...model.means],
    stds: [...model.stds],
    weights: [...model.weights],
    ...(model.intercept !== 0 ? { intercept: model.intercept } : {}),
    source: model.source,
    ...extra,
  };
}

/** Builds a score model whose means/stds (population) come from `rows` (each FEATURE_NAMES order). */
export function fitNormalisation(
  rows: readonly ArrayLike<number>[],
  weights: ArrayLike<number>,
  source: string,
  intercept = 0,
): ScoreModel {
  const means = new Float64Array(FEATURE_NAMES.length);
  const stds = new Float64Array(FEATURE_NAMES.length);
  for (let k = 0; k < FEATURE_NAMES.length; k++) {
    const { mean, std } = meanStd(rows.map((r) => r[k]));
    means[k] = mean;
    stds[k] = std;
  }
  return { means, stds, weights: Float64Array.from(weights), intercept, source };
}

/** Feature record → vector in FEATURE_NAMES order. */
export function featureVector(features: PromptFeatures): Float64Array {
  return Float64Array.from(FEATURE_NAMES, (name: FeatureName) => features[name]);
}

/** z-normalised features · weights (+ intercept). A feature with zero spread contributes 0. */
export function scoreVector(vector: ArrayLike<number>, model: ScoreModel): number {
  let score = model.intercept;
  for (let k = 0; k < model.weights.length; k++) {
    const std = model.stds[k];
    if (std > 0) score += (model.weights[k] * (vector[k] - model.means[k])) / std;
  }
  return score;
}
