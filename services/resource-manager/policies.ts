/** The planning policies the resource manager can run, by name: the planner's and `static`. */
import { BASELINE_MODELS, getPolicy, type PlannerPolicy } from "../../actors/planner/policies.ts";
import { POLICY_NAMES } from "./policy-names.ts";
import { staticPolicy, type StaticConfig } from "../../actors/control/static-policy.ts";
import type { ProfileSet } from "../../actors/profile/profile-set.ts";
import { z } from "zod";
import { ConfigurationError } from "../../contracts/errors.ts";

/** The default static configuration: a row of the reference Pareto table (pair 1→2, FID 22.03). */
export const DEFAULT_STATIC: StaticConfig = {
  light: "sd35-large-turbo",
  heavy: "sd35-medium",
  routerThreshold: 0.2,
  discThreshold: 0.2,
  lightBatchSize: 2,
  heavyBatchSize: 1,
  expectedFid: 22.03,
};

export { POLICY_NAMES };

/** The policy called `name`; `static` uses `staticConfig` (default DEFAULT_STATIC). */
export function createPolicy(name: string, profiles: ProfileSet, staticConfig?: StaticConfig): PlannerPolicy {
  if (name === "static") {
    const config = staticConfig ?? DEFAULT_STATIC;
    for (const m of [config.light, config.heavy])
      if (!profiles.byName.has(m)) throw new ConfigurationError(`static plan names unknown model "${m}"`);
    return staticPolicy(config);
  }
  let policy: PlannerPolicy;
  try {
    policy = getPolicy(name);
  } catch {
    throw new ConfigurationError(`unknown policy "${name}"; known: ${POLICY_NAMES.join(", ")}`);
  }
  // A baseline built on named models cannot run on a pool without them (it failed every tick).
  for (const m of BASELINE_NEEDS[name] ?? [])
    if (!profiles.byName.has(m)) throw new ConfigurationError(`policy ${name} needs model "${m}", which the profile pool lacks`);
  return policy;
}

/** Whether the policy called `name` plans on models its configuration names (`static` and the baselines built on named models). */
export const hasFixedModels = (name: string): boolean => name === "static" || name in BASELINE_NEEDS;

/** The models each baseline names. */
const BASELINE_NEEDS: Record<string, string[]> = {
  "fixed-pair": [BASELINE_MODELS.fixedPair.light, BASELINE_MODELS.fixedPair.heavy],
  diffserve: [BASELINE_MODELS.diffserve.light, BASELINE_MODELS.diffserve.heavy],
  "clipper-light": [BASELINE_MODELS.clipperLight],
  "clipper-heavy": [BASELINE_MODELS.clipperHeavy],
};

/** The fields `--static-config` may set, each checked; any other key is refused. */
const StaticConfigSchema = z
  .strictObject({
    light: z.string().min(1),
    heavy: z.string().min(1),
    routerThreshold: z.number().min(0).max(1),
    discThreshold: z.number().min(0).max(1),
    lightBatchSize: z.number().int().positive(),
    heavyBatchSize: z.number().int().positive(),
    expectedFid: z.number().positive(),
  })
  .partial();

/**
 * The static configuration `--static-config <json>` asks for, over DEFAULT_STATIC; throws a
 * message naming the flag for bad JSON, an unknown key, a value of the wrong type or range, or a
 * policy other than `static` (which would ignore it). The default's expected FID belongs to its
 * pair and thresholds: another configuration has none unless it gives one.
 */
export function staticConfigFor(policy: string, json: string | undefined): StaticConfig | undefined {
  if (json === undefined) return undefined;
  if (policy !== "static") throw new ConfigurationError(`--static-config applies to --policy static (the policy is ${policy})`);
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new ConfigurationError(`--static-config is not JSON: ${(err as Error).message}`);
  }
  const parsed = StaticConfigSchema.safeParse(raw);
  if (!parsed.success)
    throw new ConfigurationError(
      `--static-config: ${parsed.error.issues.map((i) => `${i.path.join(".") || "the value"}: ${i.message}`).join("; ")}`,
    );
  const given = parsed.data;
  const samePoint = (["light", "heavy", "routerThreshold", "discThreshold"] as const).every(
    (k) => given[k] === undefined || given[k] === DEFAULT_STATIC[k],
  );
  const { expectedFid, ...base } = DEFAULT_STATIC;
  return { ...base, ...(samePoint && expectedFid !== undefined ? { expectedFid } : {}), ...given };
}
