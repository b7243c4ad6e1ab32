/** The resource manager's policy names, apart from `policies.ts` so that the CLI can list them without loading the policies. */
import { POLICY_NAMES as PLANNER_POLICIES } from "../../actors/planner/policy-names.ts";

/** Every policy name this build knows: the planner's and the static one. */
export const POLICY_NAMES = [...PLANNER_POLICIES, "static"] as const;
