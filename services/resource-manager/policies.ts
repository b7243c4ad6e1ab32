/** The planning policies the resource manager can run, by name. */
import type { ProfileSet } from "../../actors/profile/profile-set.ts";
import { staticDecision, type StaticConfig } from "../../actors/control/static-policy.ts";
import type { PlanningPolicy } from "./manager.ts";

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

/** Names of the policies this build knows. */
export const POLICY_NAMES = ["static"] as const;

/** Options shared by policies. */
export interface PolicyContext {
  profiles: ProfileSet;
  staticConfig?: StaticConfig;
}

/** Builds the named policy. */
export function createPolicy(name: string, ctx: PolicyContext): PlanningPolicy {
  switch (name) {
    case "static": {
      const config = ctx.staticConfig ?? DEFAULT_STATIC;
      for (const m of [config.light, config.heavy]) if (!ctx.profiles.byName.has(m)) throw new Error(`static plan names unknown model "${m}"`);
      return async (snap) => staticDecision(config, ctx.profiles.byName, snap.workers.length);
    }
    default:
      throw new Error(`unknown policy "${name}"; known: ${POLICY_NAMES.join(", ")}`);
  }
}
