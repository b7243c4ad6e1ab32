/** Reads the profile files from disk (default: the repository's `profiles/`) into a ProfileSet. */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ModelProfileSchema, PoolProfileSchema, type ModelProfile } from "../../contracts/profile.ts";
import { buildProfileSet, type ProfileSet } from "../../actors/profile/profile-set.ts";
import {
  parseConfigGrid,
  parseDiscriminatorScores,
  parseNumericCsv,
  parsePareto,
  parsePromptFeatures,
  parsePrompts,
} from "../../actors/profile/reference.ts";
import { packagePath } from "./package-root.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

/** The repository's `profiles/` folder. */
export const DEFAULT_PROFILES_DIR = packagePath("profiles");

const cache = new Map<string, ProfileSet>();

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new ConfigurationError(`profile ${path}: ${(err as Error).message}`);
  }
}

/** Loads (once per folder) and validates the profile set. */
export function loadProfiles(dir: string = DEFAULT_PROFILES_DIR): ProfileSet {
  const hit = cache.get(dir);
  if (hit) return hit;
  const read = (...p: string[]) => readFileSync(join(dir, ...p), "utf8");
  const pool = PoolProfileSchema.parse(readJson(join(dir, "pool.json")));
  const models: ModelProfile[] = readdirSync(join(dir, "models"))
    .filter((f) => f.endsWith(".json"))
    .map((f) => {
      const parsed = ModelProfileSchema.safeParse(readJson(join(dir, "models", f)));
      if (!parsed.success) throw new ConfigurationError(`profile models/${f}: ${parsed.error.issues[0]?.message}`);
      return parsed.data;
    });
  const prompts = parsePrompts(read("reference", "prompts", "imagenet1k_captions_5k.txt"));
  const { features } = parsePromptFeatures(read("reference", "prompts", "prompt_features.csv"));
  const scoresById = new Map<number, Float64Array>();
  for (const m of models) {
    if (m.referenceId === undefined) continue;
    scoresById.set(m.referenceId, parseDiscriminatorScores(read("reference", "discriminator", `scores_model_${m.referenceId}.txt`)));
  }
  const set = buildProfileSet({
    pool,
    models,
    prompts,
    features,
    scoresById,
    paretoHybrid: parsePareto(read("reference", "tables", "pareto_hybrid.csv")),
    paretoRouterOnly: parsePareto(read("reference", "tables", "pareto_router_only.csv")),
    paretoDiscOnly: parsePareto(read("reference", "tables", "pareto_disc_only.csv")),
    configGrid: parseConfigGrid(read("reference", "tables", "config_grid.csv")),
    fidVsHeavyShare: parseNumericCsv(read("reference", "tables", "fid_vs_heavy_share.csv")).map((r) => ({
      lightId: r.light_model,
      heavyId: r.heavy_model,
      heavyShare: r.heavy_share,
      fid: r.fid,
    })),
  });
  cache.set(dir, set);
  return set;
}
