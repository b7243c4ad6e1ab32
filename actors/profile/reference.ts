/**
 * Parsers for the reference data in `profiles/reference` (the HADIS artifact): prompts, router
 * features, per-prompt discriminator scores and the lookup tables. Pure: text in, typed data out.
 */
import { ConfigurationError } from "../../contracts/errors.ts";

/** The eight router features, in the reference order. */
export const FEATURE_NAMES = [
  "promptLength",
  "tokenRarity",
  "numObjects",
  "abstractness",
  "attributeDensity",
  "spatialRelations",
  "actionVerbs",
  "namedEntities",
] as const;
/** One of the eight router features. */
export type FeatureName = (typeof FEATURE_NAMES)[number];

/** The reference router's weights, in FEATURE_NAMES order. */
export const REFERENCE_WEIGHTS = [0.85, 0.32, 0.72, 0.99, 0.76, 0.07, 0.78, 0.01] as const;

/** Splits text into non-empty trimmed lines. */
function lines(text: string): string[] {
  return text.split(/\r?\n/).filter((l) => l.trim().length > 0);
}

/** Prompts, one a line; line i is prompt index i. */
export function parsePrompts(text: string): string[] {
  return text.split(/\r?\n/).filter((l, i, all) => !(i === all.length - 1 && l === ""));
}

/** The discriminator's P(real) of every image, in file order (prompt-major: images of prompt i are rows m·i …). */
export function parseDiscriminatorImageScores(text: string): Float64Array {
  return Float64Array.from(lines(text), (row, i) => {
    const parts = row.trim().split(/\s+/);
    const real = Number(parts[1]);
    if (parts.length !== 2 || !Number.isFinite(real)) throw new ConfigurationError(`bad score row ${i + 1}: "${row}"`);
    return real;
  });
}

/** Per-prompt discriminator score (mean P(real) of the images of each prompt). */
export function parseDiscriminatorScores(text: string, imagesPerPrompt = 4): Float64Array {
  const rows = lines(text);
  if (rows.length % imagesPerPrompt !== 0) throw new ConfigurationError(`score rows (${rows.length}) not a multiple of ${imagesPerPrompt}`);
  const out = new Float64Array(rows.length / imagesPerPrompt);
  for (let i = 0; i < rows.length; i++) {
    const parts = rows[i].trim().split(/\s+/);
    const real = Number(parts[1]);
    if (parts.length !== 2 || !Number.isFinite(real)) throw new ConfigurationError(`bad score row ${i + 1}: "${rows[i]}"`);
    out[Math.floor(i / imagesPerPrompt)] += real / imagesPerPrompt;
  }
  return out;
}

/** Router features per prompt: `features[i]` is prompt i's eight features. */
export function parsePromptFeatures(text: string): { prompts: string[]; features: Float64Array[] } {
  const rows = lines(text);
  const prompts: string[] = [];
  const features: Float64Array[] = [];
  for (const row of rows.slice(1)) {
    // The prompt may itself contain commas: the eight numbers are the last eight fields.
    const parts = row.split(",");
    const nums = parts.slice(-8).map(Number);
    if (nums.length !== 8 || nums.some((n) => !Number.isFinite(n))) throw new ConfigurationError(`bad feature row: "${row}"`);
    prompts.push(parts.slice(0, -8).join(",").replace(/^"|"$/g, ""));
    features.push(Float64Array.from(nums));
  }
  return { prompts, features };
}

/** Generic numeric CSV with a header row. */
export function parseNumericCsv(text: string): Record<string, number>[] {
  const rows = lines(text);
  const header = rows[0].split(",").map((h) => h.trim());
  return rows.slice(1).map((row, i) => {
    const parts = row.split(",");
    const rec: Record<string, number> = {};
    header.forEach((h, j) => {
      if (h === "") return;
      const n = Number(parts[j]);
      if (!Number.isFinite(n)) throw new ConfigurationError(`bad number in row ${i + 2}, column ${h}: "${parts[j]}"`);
      rec[h] = n;
    });
    return rec;
  });
}

/** One row of a Pareto lookup table. */
export interface ParetoRow {
  lightId: number;
  heavyId: number;
  routerThreshold: number;
  discThreshold: number;
  heavyShare: number;
  fid: number;
}

/** Parses `pareto_*.csv`. */
export function parsePareto(text: string): ParetoRow[] {
  return parseNumericCsv(text).map((r) => ({
    lightId: r.light_model,
    heavyId: r.heavy_model,
    routerThreshold: r.router_thres,
    discThreshold: r.conf_thres,
    heavyShare: r.heavy_share,
    fid: r.fid,
  }));
}

/** One row of the full configuration grid. */
export interface GridRow {
  lightId: number;
  heavyId: number;
  routerThreshold: number;
  discThreshold: number;
  heavyShare: number;
  latencyS: number;
  fid: number;
}

/** Parses `config_grid.csv`. */
export function parseConfigGrid(text: string): GridRow[] {
  return parseNumericCsv(text).map((r) => ({
    lightId: r.light_model,
    heavyId: r.heavy_model,
    routerThreshold: r.router_ratio,
    discThreshold: r.disc_ratio,
    heavyShare: r.threshold,
    latencyS: r.latency,
    fid: r.fid,
  }));
}

/** One arrival of a trace. */
export interface Arrival {
  atMs: number;
  promptIdx: number;
}

/** Parses a trace: lines `arrival_ms,prompt_idx`. */
export function parseTrace(text: string): Arrival[] {
  return lines(text).map((row, i) => {
    const [a, p] = row.split(",");
    const atMs = Number(a);
    const promptIdx = Number(p);
    if (!Number.isFinite(atMs) || !Number.isInteger(promptIdx)) throw new ConfigurationError(`bad trace row ${i + 1}: "${row}"`);
    return { atMs, promptIdx };
  });
}
