/** The planning policies the resource manager can run, by name: the planner's and `static`. */
import { getPolicy, POLICY_NAMES as PLANNER_POLICIES, type PlannerPolicy } from "../../actors/planner/policies.ts";
import { staticPolicy, type StaticConfig } from "../../actors/control/static-policy.ts";
import type { ProfileSet } from "../../actors/profile/profile-set.ts";

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

/** Every policy name this build knows. */
export const POLICY_NAMES = [...PLANNER_POLICIES, "static"] as const;

/** The policy called `name`; `static` uses `staticConfig` (default DEFAULT_STATIC). */
export function createPolicy(name: string, profiles: ProfileSet, staticConfig?: StaticConfig): PlannerPolicy {
  if (name === "static") {
    const config = staticConfig ?? DEFAULT_STATIC;
    for (const m of [config.light, config.heavy]) if (!profiles.byName.has(m)) throw new Error(`static plan names unknown model "${m}"`);
    return staticPolicy(config);
  }
  try {
    return getPolicy(name);
  } catch {
    throw new Error(`unknown policy "${name}"; known: ${POLICY_NAMES.join(", ")}`);
  }
}
