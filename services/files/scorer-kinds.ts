/** The router's scorer names, apart from `router-scoring.ts` so that the CLI can list them without loading a scorer. */

/** The router's scorers, as `--scorer` names them. */
export const SCORER_KINDS = ["analyzer", "reference", "learned"] as const;
/** One scorer name. */
export type ScorerKind = (typeof SCORER_KINDS)[number];

/**
 * The scorer a policy runs unless told otherwise: hadis-plus (and the simulator's clairvoyant
 * bound, which plans as it does) the learned per-pair model (it raised
 * the served quality in the simulator, docs/router.md); every other policy the paper's rule-based
 * analyzer, so that HADIS stays the reference design hadis-plus is measured against.
 */
export function defaultScorerFor(policy: string): ScorerKind {
  return policy === "hadis-plus" || policy === "clairvoyant" ? "learned" : "analyzer";
}
