/** The planner's policy names, apart from `policies.ts` so that the CLI can list them without loading the planner. */

/** Names of the policies, as the resource manager's `--policy` takes them. */
export const POLICY_NAMES = [
  "hadis",
  "hadis-plus",
  "router-only",
  "disc-only",
  "fixed-pair",
  "diffserve",
  "clipper-light",
  "clipper-heavy",
  "infaas-acc",
  "proteus",
] as const;
/** One policy name. */
export type PolicyName = (typeof POLICY_NAMES)[number];
