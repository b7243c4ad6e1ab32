/**
 * The loaded profile set: the model pool with its measured costs and the reference data
 * (per-prompt features and discriminator scores, lookup tables). Built from parsed files.
 */
import { BATCH_SIZES, type ModelProfile, type PoolProfile } from "../../contracts/profile.ts";
import type { GridRow, ParetoRow } from "./reference.ts";
import { fnv1a, sortedCopy } from "./stats.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

/** Reference measurements of the 5,000 ImageNet-caption prompts. */
export interface ReferenceData {
  prompts: string[];
  /** Trimmed prompt text → its index. */
  promptIndex: Map<string, number>;
  /** Eight router features per prompt. */
  features: Float64Array[];
  /** Per-prompt discriminator score (mean P(real)) per model name. */
  scores: Map<string, Float64Array>;
  /** The same scores sorted ascending, for percentile thresholds. */
  sortedScores: Map<string, Float64Array>;
  paretoHybrid: ParetoRow[];
  paretoRouterOnly: ParetoRow[];
  paretoDiscOnly: ParetoRow[];
  configGrid: GridRow[];
  /** FID of a plain cascade as heavy share goes 0..1, per (light id, heavy id). */
  fidVsHeavyShare: { lightId: number; heavyId: number; heavyShare: number; fid: number }[];
}

/** Everything the planner and the profile backends need. */
export interface ProfileSet {
  pool: PoolProfile;
  /** Model profiles in pool order. */
  models: ModelProfile[];
  byName: Map<string, ModelProfile>;
  /** Reference model id → model name. */
  nameByReferenceId: Map<number, string>;
  reference: ReferenceData;
}

/** Inputs of `buildProfileSet`. */
export interface ProfileParts {
  pool: PoolProfile;
  models: ModelProfile[];
  prompts: string[];
  features: Float64Array[];
  /** Per-prompt scores indexed by reference model id. */
  scoresById: Map<number, Float64Array>;
  paretoHybrid: ParetoRow[];
  paretoRouterOnly: ParetoRow[];
  paretoDiscOnly: ParetoRow[];
  configGrid: GridRow[];
  fidVsHeavyShare: { lightId: number; heavyId: number; heavyShare: number; fid: number }[];
}

/** Assembles and cross-checks a profile set. */
export function buildProfileSet(parts: ProfileParts): ProfileSet {
  const byName = new Map(parts.models.map((m) => [m.name, m]));
  for (const name of parts.pool.models) if (!byName.has(name)) throw new ConfigurationError(`pool names model "${name}" with no profile`);
  const models = parts.pool.models.map((n) => byName.get(n)!);
  const nameByReferenceId = new Map<number, string>();
  const scores = new Map<string, Float64Array>();
  const sortedScores = new Map<string, Float64Array>();
  for (const m of models) {
    if (m.referenceId === undefined) continue;
    nameByReferenceId.set(m.referenceId, m.name);
    const s = parts.scoresById.get(m.referenceId);
    if (s) {
      if (s.length !== parts.prompts.length)
        throw new ConfigurationError(`scores of ${m.name}: ${s.length} prompts, expected ${parts.prompts.length}`);
      scores.set(m.name, s);
      sortedScores.set(m.name, sortedCopy(s));
    }
  }
  if (parts.features.length !== parts.prompts.length) throw new ConfigurationError("features and prompts differ in length");
  const promptIndex = new Map<string, number>();
  parts.prompts.forEach((p, i) => {
    const key = p.trim();
    if (!promptIndex.has(key)) promptIndex.set(key, i);
  });
  return {
    pool: parts.pool,
    models,
    byName,
    nameByReferenceId,
    reference: {
      prompts: parts.prompts,
      promptIndex,
      features: parts.features,
      scores,
      sortedScores,
      paretoHybrid: parts.paretoHybrid,
      paretoRouterOnly: parts.paretoRouterOnly,
      paretoDiscOnly: parts.paretoDiscOnly,
      configGrid: parts.configGrid,
      fidVsHeavyShare: parts.fidVsHeavyShare,
    },
  };
}

/**
 * The set with some pool models left out (models that would not load): what the planner may
 * choose from. Their profiles and reference scores stay readable by name elsewhere; the set is
 * returned unchanged when it would be left with no model.
 */
export function withoutModels(set: ProfileSet, out: ReadonlySet<string>): ProfileSet {
  const models = set.models.filter((m) => !out.has(m.name));
  if (models.length === set.models.length || models.length === 0) return set;
  return {
    ...set,
    pool: { ...set.pool, models: models.map((m) => m.name) },
    models,
    byName: new Map(models.map((m) => [m.name, m])),
    nameByReferenceId: new Map([...set.nameByReferenceId].filter(([, name]) => !out.has(name))),
  };
}

/** The batch sizes the planner may give `model`: `BATCH_SIZES` up to its `maxBatch` (1 at least). */
export function batchSizesOf(model: ModelProfile): number[] {
  const sizes = BATCH_SIZES.filter((b) => b <= (model.maxBatch ?? Number.POSITIVE_INFINITY));
  return sizes.length > 0 ? sizes : [1];
}

/** The set with the largest batch of some models lowered to what their workers found runs (`caps`); unchanged without caps. */
export function withBatchCaps(set: ProfileSet, caps: ReadonlyMap<string, number>): ProfileSet {
  if (![...caps.keys()].some((m) => set.byName.has(m))) return set;
  const models = set.models.map((m) =>
    caps.has(m.name) ? { ...m, maxBatch: Math.min(caps.get(m.name)!, m.maxBatch ?? Number.POSITIVE_INFINITY) } : m,
  );
  return { ...set, models, byName: new Map(models.map((m) => [m.name, m])) };
}

/**
 * The reference prompt whose measurements stand for `prompt`: itself when it is one of the
 * reference prompts, else a deterministic draw seeded by the prompt text.
 */
export function referenceIndexFor(set: ProfileSet, prompt: string): { index: number; known: boolean } {
  const key = prompt.trim();
  const known = set.reference.promptIndex.get(key);
  if (known !== undefined) return { index: known, known: true };
  return { index: fnv1a(key) % set.reference.prompts.length, known: false };
}

/** Profiled latency of one batch, in ms, scaled by the time scale; sizes between profiled ones interpolate. */
export function batchLatencyMs(model: ModelProfile, batchSize: number, timeScale: number): number {
  const table = model.latencyMsByBatch;
  const exact = table[String(batchSize)];
  if (exact !== undefined) return exact * timeScale;
  const sizes = Object.keys(table)
    .map(Number)
    .sort((a, b) => a - b);
  let lo = sizes[0];
  let hi = sizes[sizes.length - 1];
  for (const s of sizes) {
    if (s <= batchSize) lo = s;
    if (s >= batchSize) {
      hi = s;
      break;
    }
  }
  if (batchSize >= hi) return (table[String(hi)] / hi) * batchSize * timeScale;
  const a = table[String(lo)];
  const b = table[String(hi)];
  const f = hi === lo ? 0 : (batchSize - lo) / (hi - lo);
  return (a + (b - a) * f) * timeScale;
}

/** Largest batch size the model profile measures. */
export function maxProfiledBatch(model: ModelProfile): number {
  return Math.max(...Object.keys(model.latencyMsByBatch).map(Number));
}
