/**
 * Which allocator a policy runs under a fidelity: the artifact's definition when its switch is
 * on (`clipper`, `infaas`, `proteus`, `diffserve`, `hadis` for HADIS and its ablations), our
 * planner's otherwise.
 */
import { BASELINE_MODELS, getPolicy, type PlannerPolicy } from "../planner/policies.ts";
import type { ProfileSet } from "../profile/profile-set.ts";
import type { ParetoRow } from "../profile/reference.ts";
import type { ArtifactMechanism, Fidelity } from "./mechanisms.ts";
export { isHadisFamily } from "./mechanisms.ts";
import { diffserveIlp, hadisMilp, proteusIlp } from "./milps.ts";
import { clipperDecision, infaasDecision } from "./rules.ts";

/** The table each HADIS-family policy plans over (the artifact's `--cascade_table`); HADIS's for the others. */
export function tableOf(name: string, p: ProfileSet): ParetoRow[] {
  switch (name) {
    case "router-only":
      return p.reference.paretoRouterOnly;
    case "disc-only":
      return p.reference.paretoDiscOnly;
    case "fixed-pair": {
      const l = p.byName.get(BASELINE_MODELS.fixedPair.light)?.referenceId;
      const h = p.byName.get(BASELINE_MODELS.fixedPair.heavy)?.referenceId;
      return p.reference.paretoHybrid.filter((r) => r.lightId === l && r.heavyId === h);
    }
    default:
      return p.reference.paretoHybrid;
  }
}

/** The simulator's bound: hadis-plus's planner told the demand to come (`hadis sim --policy clairvoyant`). */
export const CLAIRVOYANT = "clairvoyant";

/** The switch that gives each policy the artifact's definition. */
export const POLICY_MECHANISM: Record<string, ArtifactMechanism> = {
  "clipper-light": "clipper",
  "clipper-heavy": "clipper",
  "infaas-acc": "infaas",
  proteus: "proteus",
  diffserve: "diffserve",
  hadis: "hadis",
  "router-only": "hadis",
  "disc-only": "hadis",
  "fixed-pair": "hadis",
};

/** The artifact's allocator for `name`. */
function artifactAllocator(name: string): PlannerPolicy {
  switch (name) {
    case "clipper-light":
      return async (s, p) => clipperDecision(s, p, "light");
    case "clipper-heavy":
      return async (s, p) => clipperDecision(s, p, "heavy");
    case "infaas-acc":
      return async (s, p) => infaasDecision(s, p);
    case "proteus":
      return (s, p, solve) => proteusIlp(s, p, solve);
    case "diffserve":
      return (s, p, solve) => diffserveIlp(s, p, solve);
    default:
      return (s, p, solve) => hadisMilp(s, p, tableOf(name, p), solve);
  }
}

/** Whether `name` runs the artifact's definition under `fidelity`. */
export function usesArtifactAllocator(name: string, fidelity: Fidelity): boolean {
  const m = POLICY_MECHANISM[name];
  return m !== undefined && fidelity.on.has(m);
}

/** The policy `name` under `fidelity`; throws a RangeError for an unknown name. */
export function policyFor(name: string, fidelity: Fidelity): PlannerPolicy {
  // The clairvoyant bound plans as hadis-plus does, with the demand the trace will bring (the simulator's `demandOracle`).
  // It is our design's bound: the artifact's planners see the in-flight backlog (its `demand` switch), which
  // an oracle of arrivals does not tell, so a run of it there measured nothing (violations of 0.03-0.36).
  if (name === CLAIRVOYANT && fidelity.on.has("demand"))
    throw new RangeError(
      "policy clairvoyant is the bound of the native fidelity: the artifact's demand signal is the in-flight backlog, which an arrival oracle does not give (run it with --fidelity native, or --mechanisms without demand)",
    );
  const native = getPolicy(name === CLAIRVOYANT ? "hadis-plus" : name);
  return usesArtifactAllocator(name, fidelity) ? artifactAllocator(name) : native;
}

/** Clipper-Heavy's workers start a query only if it can finish within this many SLOs under the artifact (`SLO_ADMISSION_FACTOR`); others 1.5. */
export function admissionFactor(name: string, fidelity: Fidelity): number {
  return name === "clipper-heavy" && fidelity.on.has("clipper") ? 1.0 : 1.5;
}
