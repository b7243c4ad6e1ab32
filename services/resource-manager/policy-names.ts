/** The resource manager's policy names, apart from `policies.ts` so that the CLI can list them without loading the policies. */
import { POLICY_NAMES as PLANNER_POLICIES } from "../../actors/planner/policy-names.ts";

/** Every policy name this build knows: the planner's and the static one. */
export const POLICY_NAMES = [...PLANNER_POLICIES, "static"] as const;

/**
 * The policy `npm start` and `hadis start` run unless told otherwise: hadis-plus, since it met the
 * issue's three claims against HADIS on the anchor, the load sweep and the step, in the simulator
 * under both fidelities and live (docs/benchmarks.md, "Beyond the paper"). `--policy hadis` runs
 * the paper's.
 */
export const DEFAULT_POLICY = "hadis-plus";
