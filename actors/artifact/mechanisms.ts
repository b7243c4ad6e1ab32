/**
 * The mechanisms by which the HADIS paper's artifact (public repository qizhengyang98/HADIS)
 * differs from our serving design, each a named switch. `native` turns none on (our design);
 * `artifact` turns all on and re-enacts the artifact's profile-driven E1 run; any subset can be
 * named to see what one mechanism does to which system.
 */

/** The switches, in the order the mechanism table reads them. */
export const ARTIFACT_MECHANISMS = [
  "dispatch",
  "proteus",
  "infaas",
  "demand",
  "clipper",
  "diffserve",
  "hadis",
  "scoring",
  "drops",
  "latency",
  "swaps",
  "tick",
] as const;

/** One artifact mechanism. */
export type ArtifactMechanism = (typeof ARTIFACT_MECHANISMS)[number];

/** What each switch turns on, and the artifact files it follows (paths in qizhengyang98/HADIS). */
export const MECHANISM_DOCS: Record<ArtifactMechanism, { what: string; follows: string }> = {
  dispatch: {
    what: "each worker keeps its own FIFO queue; a query goes to a uniformly random worker of its model, an escalated or router-hard query to a random worker of the next model; routing tables are rebuilt once a second",
    follows:
      "hadis/src/load_balancer/load_balancer.py (balanceLoadEqual, eventLoop), hadis/src/client/client.py (getHostID), hadis/src/worker/worker.py (getHostID, forwardIntermediateQuery)",
  },
  proteus: {
    what: "Proteus maximises the inverse-FID-weighted worker count subject to total throughput >= 1.25 x demand and latency x (1 + 1.2 x queue/arrivals) <= SLO per model; every worker, whatever its model, takes an equal share of the traffic",
    follows:
      "hadis/src/controller/qaware_multi_cascade_ILP.py (solve_proteus_milp), hadis/src/controller/controller.py (allocateByProteusILP)",
  },
  infaas: {
    what: "INFaaS-Acc starts on sd3.5-large and runs one variant on every worker at the largest batch whose latency fits the SLO; expected latency = batch latency + 0.225 x queue / (workers x batch / latency); a step down above the SLO, up below 0.89 x SLO, no capacity check; a queue over 60 jumps to the lightest variant",
    follows: "hadis/src/controller/infaas.py (solve_infaas_accuracy), hadis/src/controller/controller.py (allocateByINFaaSAccuracy)",
  },
  demand: {
    what: "the planners' demand is 1.05 x an EWMA (half-life 3 ticks of 1 s, last 20 ticks) of the queries in flight as the controller knows them (a dropped one lingers until 2 x SLO): a count, not a rate",
    follows: "hadis/src/controller/controller.py (computeSystemEWMA, checkWorkerHeartbeat, computeSLOTimeoutsPerSec)",
  },
  clipper: {
    what: "Clipper-Light runs sdxl-lightning and Clipper-Heavy sd3.5-large, each at the largest batch whose (planner) latency fits the SLO; Clipper-Heavy's workers start a query only when it can finish within 1.0 x SLO",
    follows: "hadis/src/controller/controller.py (allocateByStaticModel, SLO_ADMISSION_FACTOR), hadis/src/config.py (CLIPPER_LIGHT_MODEL)",
  },
  diffserve: {
    what: "DiffServe maximises the escalation share on a 0.005 grid (light capacity >= demand, heavy capacity >= demand x share, light + heavy latency + queue delays <= SLO, one worker kept for the sink); all light at share 0 when infeasible; before any demand 9/7 workers at batch 8 escalating everything",
    follows:
      "hadis/src/controller/diffserve_cascade_ILP.py (DiffServeILPAllocator), hadis/src/controller/controller.py (allocateByDiffServeILP)",
  },
  hadis: {
    what: "HADIS's own planner and router as the artifact has them: one MILP per model pair over the hybrid table, the light model sized for all of the demand (route ratio 1), light + heavy latency + queue delays <= SLO without the judge, every worker on the lightest model when infeasible or before any demand; the router scores the precomputed reference features with fixed weights by the query's sequence number, hard when at or above the (1 - r) percentile entry",
    follows:
      "hadis/src/controller/qaware_multi_cascade_ILP.py (create_lookup_table, solve_milp_loop), hadis/src/controller/controller.py (allocateByMultiCascadeAlg), hadis/src/worker/model.py (isHardByRouter, loadFromStorage)",
  },
  scoring: {
    what: "per-second rows of outcomes as the controller learns them (an answer at the sink's next heartbeat, a drop 2 x SLO after the start); 5-row windows of (timeout + drop) / total; FID per window (HADIS and its ablations: the table FID of the configuration in force, 29.75 when shed; INFaaS-Acc: its dominant model; the others: the two lightest models of the query mix, where a cascade's light model counts every query, an idle window 29.76); a 5-point moving average of each series, then the mean",
    follows:
      "hadis/analysis/parse_logs.py, analysis/plot_e1_end2end.py (find_offset, _load), hadis/src/controller/controller.py (saveResultsToCSV)",
  },
  drops: {
    what: "no deadline in the request path: no admission bound, escalation whatever the time left, no light image served as the deadline nears; a worker drops a query at dequeue when elapsed + batch runtime > 1.5 x SLO; a late answer counts as timed out, none within 2 x SLO as dropped",
    follows: "hadis/src/worker/model.py (serviceQueue, SLO_FACTOR), hadis/src/controller/controller.py (computeSLOTimeoutsPerSec)",
  },
  latency: {
    what: "the light worker judges its own batch (10 ms a batch on every worker) from the query's sequence number, the threshold at index int(N x share) - 1 of the sorted scores; batches of 3, 5, 6 and 7 run at interpolated latencies, 9-15 and 17-31 at the batch-4 latency; the planners see latencies rounded to 0.1 s",
    follows: "hadis/src/worker/model.py (serviceQueue, executeBatch), hadis/src/config.py (get_model_runtimes, get_controller_runtimes)",
  },
  swaps: {
    what: "a swap costs nothing in profile mode (no load or unload time); a worker keeps its queue through a swap and runs it on the new model",
    follows: "hadis/src/worker/model.py (loadFromStorage, readIPCMessages), hadis/src/worker/worker.py (LoadModel)",
  },
  tick: {
    what: "the controller ticks once a second and re-plans every 50 trace-seconds (5 s at time scale 0.1); every plan is adopted at once (no damping, no dwell) and workers are assigned in registration order",
    follows: "hadis/src/config.py (ALLOC_INTERVAL_TRACE_SEC), hadis/src/controller/controller.py (eventLoop, allocate*)",
  },
};

/** A run's fidelity: which artifact mechanisms are on. */
export interface Fidelity {
  /** `native`, `artifact`, or the list of switches when it is neither. */
  name: string;
  on: ReadonlySet<ArtifactMechanism>;
}

/** Our design: no artifact mechanism. */
export const NATIVE: Fidelity = { name: "native", on: new Set() };
/** The artifact re-enacted: every mechanism. */
export const ARTIFACT: Fidelity = { name: "artifact", on: new Set(ARTIFACT_MECHANISMS) };

/** Whether `name` is a mechanism's name. */
export function isMechanism(name: string): name is ArtifactMechanism {
  return (ARTIFACT_MECHANISMS as readonly string[]).includes(name);
}

/** A fidelity with exactly these switches on, named for what it is. */
export function fidelityOf(on: Iterable<ArtifactMechanism>): Fidelity {
  const set = new Set(on);
  if (set.size === 0) return NATIVE;
  if (set.size === ARTIFACT_MECHANISMS.length) return ARTIFACT;
  return { name: ARTIFACT_MECHANISMS.filter((m) => set.has(m)).join("+"), on: set };
}

/**
 * Reads `--fidelity` (`native` | `artifact`) and `--mechanisms` (a comma list; `-name` turns one
 * off, so `artifact` with `-dispatch` is the artifact without its dispatch). Throws a RangeError
 * naming what is wrong.
 */
export function parseFidelity(fidelity = "native", mechanisms?: string): Fidelity {
  if (fidelity !== "native" && fidelity !== "artifact") throw new RangeError(`fidelity must be native or artifact (got "${fidelity}")`);
  const on = new Set<ArtifactMechanism>(fidelity === "artifact" ? ARTIFACT_MECHANISMS : []);
  for (const raw of (mechanisms ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const off = raw.startsWith("-");
    const name = off ? raw.slice(1) : raw;
    if (!isMechanism(name)) throw new RangeError(`unknown mechanism "${name}" (known: ${ARTIFACT_MECHANISMS.join(", ")})`);
    if (off) on.delete(name);
    else on.add(name);
  }
  return fidelityOf(on);
}

/** Shorthand: whether mechanism `m` is on in `f`. */
export const has = (f: Fidelity, m: ArtifactMechanism): boolean => f.on.has(m);

/** The mechanisms a plan says the system runs under (unknown names are ignored: a newer manager's). */
export function planMechanisms(plan: { mechanisms?: readonly string[] } | null | undefined): ReadonlySet<ArtifactMechanism> {
  return new Set((plan?.mechanisms ?? []).filter(isMechanism));
}

/** HADIS and its ablations: the policies that run the artifact's router under `hadis`. */
export const HADIS_FAMILY: readonly string[] = ["hadis", "router-only", "disc-only", "fixed-pair"];

/** Whether `policy` is HADIS or one of its ablations. */
export function isHadisFamily(policy: string): boolean {
  return HADIS_FAMILY.includes(policy);
}
