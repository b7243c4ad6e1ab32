/**
 * Planner policies selected by name: HADIS, its ablations and the baselines of the paper's
 * end-to-end experiment, all as `(snapshot, profiles, solve) → decision` over the same services.
 * Choices are documented in `actors/planner/README.md`.
 */
import type { ParetoRow } from "../profile/reference.ts";
import { batchLatencyMs, batchSizesOf, type ProfileSet } from "../profile/profile-set.ts";
import { workerCapacityQps, maxThroughputBatch, type PlanDecision } from "./decision.ts";
import { planWithMilp } from "./milp.ts";
import { hadisPlusDecision } from "./hadis-plus.ts";
import type { PlannerSnapshot } from "./snapshot.ts";
import type { SolveFn } from "./solver.ts";
import { POLICY_NAMES, type PolicyName } from "./policy-names.ts";

/** A planning policy: one decision per control tick; never throws on infeasibility. */
export type PlannerPolicy = (snapshot: PlannerSnapshot, profiles: ProfileSet, solve: SolveFn) => Promise<PlanDecision>;

export { POLICY_NAMES, type PolicyName };

/** Policies whose plans follow a rule of their own rather than an expected-FID objective (damped by dwell only). */
export const RULE_DRIVEN_POLICIES: readonly PolicyName[] = ["infaas-acc", "clipper-light", "clipper-heavy"];

/** Models the fixed-pair, DiffServe and Clipper baselines use (names in `profiles/`). */
export const BASELINE_MODELS = {
  fixedPair: { light: "sd35-medium", heavy: "sd35-large" },
  diffserve: { light: "sd35-large-turbo", heavy: "sd35-large" },
  clipperLight: "sd35-large-turbo",
  clipperHeavy: "sd35-large",
} as const;

/** INFaaS-Acc stepping thresholds, as shares of the SLO. */
export const INFAAS_STEP = {
  /** Step down when the current variant's queue delay + batch latency exceeds this share of the SLO. */
  downAtSloShare: 0.5,
  /** Step up only when the queue delay is below this share of the SLO … */
  upBelowSloShare: 0.1,
  /** … and the more accurate variant would have this much spare capacity. */
  upHeadroom: 1.25,
} as const;

const refId = (profiles: ProfileSet, name: string): number => {
  const id = profiles.byName.get(name)?.referenceId;
  if (id === undefined) throw new Error(`model ${name} has no reference id`);
  return id;
};

/** Rows of the MILP table for a pair, from the HADIS Pareto table. */
function pairRows(table: ParetoRow[], profiles: ProfileSet, light: string, heavy: string): ParetoRow[] {
  const l = refId(profiles, light);
  const h = refId(profiles, heavy);
  return table.filter((r) => r.lightId === l && r.heavyId === h);
}

/**
 * Every worker on one model, with the smallest batch size (lowest latency) whose capacity covers
 * demand inside the SLO; if none does, the highest-throughput batch and `degraded: 1`.
 */
export function singleModelDecision(snapshot: PlannerSnapshot, profiles: ProfileSet, model: string, why: string): PlanDecision {
  const p = profiles.byName.get(model)!;
  const workers = snapshot.workers.length;
  const queueMs = snapshot.queueDelayMs[model] ?? 0;
  const fitting = batchSizesOf(p).filter(
    (b) =>
      batchLatencyMs(p, b, snapshot.timeScale) + queueMs <= snapshot.sloMs &&
      workers * workerCapacityQps(p, b, snapshot.timeScale) >= snapshot.demandQps,
  );
  const covered = fitting.length > 0 && workers > 0;
  const batchSize = covered ? fitting[0] : maxThroughputBatch(p, snapshot.sloMs, queueMs, snapshot.timeScale);
  const capacity = workers * workerCapacityQps(p, batchSize, snapshot.timeScale);
  return {
    pair: { light: model, heavy: model },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: 0,
    expectedFid: p.fidAlone ?? Number.NaN,
    models: { [model]: { workers, batchSize } },
    reason: `${why}: all ${workers} workers on ${model} at batch ${batchSize}, capacity ${capacity.toFixed(1)} qps for ${snapshot.demandQps.toFixed(1)} qps${covered ? "" : " (short)"}`,
    degraded: covered ? 0 : 1,
  };
}

/** Capacity of all workers on `model` at its best batch inside the SLO, qps. */
function fullCapacityQps(snapshot: PlannerSnapshot, profiles: ProfileSet, model: string): number {
  const p = profiles.byName.get(model)!;
  const queueMs = snapshot.queueDelayMs[model] ?? 0;
  const b = maxThroughputBatch(p, snapshot.sloMs, queueMs, snapshot.timeScale);
  if (batchLatencyMs(p, b, snapshot.timeScale) + queueMs > snapshot.sloMs) return 0;
  return snapshot.workers.length * workerCapacityQps(p, b, snapshot.timeScale);
}

/**
 * INFaaS-Acc: one variant at a time, most accurate first. The variant in force (read from the
 * current plan when it was issued by this policy) steps one down under queue pressure or
 * shortfall and one up when the more accurate variant has headroom and the queue is short.
 */
export function infaasDecision(snapshot: PlannerSnapshot, profiles: ProfileSet): PlanDecision {
  const variants = [...profiles.models].sort((a, b) => (a.fidAlone ?? Infinity) - (b.fidAlone ?? Infinity)).map((m) => m.name);
  const fits = (m: string, headroom = 1) => fullCapacityQps(snapshot, profiles, m) >= snapshot.demandQps * headroom;
  const current = snapshot.current?.policy === "infaas-acc" ? variants.indexOf(snapshot.current.pair.light) : -1;
  if (current < 0) {
    const first = variants.findIndex((m) => fits(m));
    const pick = first >= 0 ? first : variants.length - 1;
    return singleModelDecision(snapshot, profiles, variants[pick], `infaas-acc: start on the most accurate variant that fits`);
  }
  const model = variants[current];
  const p = profiles.byName.get(model)!;
  const batch = snapshot.current?.models[model]?.batchSize ?? 1;
  const pressureMs = (snapshot.queueDelayMs[model] ?? 0) + batchLatencyMs(p, batch, snapshot.timeScale);
  if ((pressureMs > INFAAS_STEP.downAtSloShare * snapshot.sloMs || !fits(model)) && current < variants.length - 1) {
    return singleModelDecision(
      snapshot,
      profiles,
      variants[current + 1],
      `infaas-acc: step down from ${model} (queue+batch ${pressureMs.toFixed(0)} ms)`,
    );
  }
  const upQueueOk = (snapshot.queueDelayMs[model] ?? 0) < INFAAS_STEP.upBelowSloShare * snapshot.sloMs;
  if (current > 0 && upQueueOk && fits(variants[current - 1], INFAAS_STEP.upHeadroom)) {
    return singleModelDecision(snapshot, profiles, variants[current - 1], `infaas-acc: step up from ${model}`);
  }
  return singleModelDecision(snapshot, profiles, model, `infaas-acc: stay on ${model}`);
}

/** Proteus's table: plain splits of each pair by heavy share (no cascade), FID from `fid_vs_heavy_share`. */
export function proteusTable(profiles: ProfileSet): ParetoRow[] {
  return profiles.reference.fidVsHeavyShare.map((r) => ({
    lightId: r.lightId,
    heavyId: r.heavyId,
    routerThreshold: r.heavyShare,
    discThreshold: 0,
    heavyShare: r.heavyShare,
    fid: r.fid,
  }));
}

/** DiffServe's table: the config-grid rows of its pair with no router share. */
export function diffserveTable(profiles: ProfileSet): ParetoRow[] {
  const l = refId(profiles, BASELINE_MODELS.diffserve.light);
  const h = refId(profiles, BASELINE_MODELS.diffserve.heavy);
  return profiles.reference.configGrid
    .filter((r) => r.lightId === l && r.heavyId === h && r.routerThreshold === 0)
    .map(({ lightId, heavyId, routerThreshold, discThreshold, heavyShare, fid }) => ({
      lightId,
      heavyId,
      routerThreshold,
      discThreshold,
      heavyShare,
      fid,
    }));
}

const tag = (name: string, d: PlanDecision): PlanDecision => ({ ...d, reason: `${name}: ${d.reason}` });

const POLICIES: Record<PolicyName, PlannerPolicy> = {
  hadis: async (s, p, solve) => tag("hadis", await planWithMilp(s, p, p.reference.paretoHybrid, solve)),
  // HADIS's table, swaps priced, backlogs cleared rather than fled (actors/planner/hadis-plus.ts).
  "hadis-plus": async (s, p, solve) => tag("hadis-plus", await hadisPlusDecision(s, p, p.reference.paretoHybrid, solve)),
  "router-only": async (s, p, solve) => tag("router-only", await planWithMilp(s, p, p.reference.paretoRouterOnly, solve)),
  "disc-only": async (s, p, solve) => tag("disc-only", await planWithMilp(s, p, p.reference.paretoDiscOnly, solve)),
  "fixed-pair": async (s, p, solve) =>
    tag(
      "fixed-pair",
      await planWithMilp(
        s,
        p,
        pairRows(p.reference.paretoHybrid, p, BASELINE_MODELS.fixedPair.light, BASELINE_MODELS.fixedPair.heavy),
        solve,
      ),
    ),
  diffserve: async (s, p, solve) => tag("diffserve", await planWithMilp(s, p, diffserveTable(p), solve)),
  "clipper-light": async (s, p) => singleModelDecision(s, p, BASELINE_MODELS.clipperLight, "clipper-light"),
  "clipper-heavy": async (s, p) => singleModelDecision(s, p, BASELINE_MODELS.clipperHeavy, "clipper-heavy"),
  "infaas-acc": async (s, p) => infaasDecision(s, p),
  proteus: async (s, p, solve) => tag("proteus", await planWithMilp(s, p, proteusTable(p), solve, { judge: false })),
};

/** Whether `name` is a known policy. */
export function isPolicyName(name: string): name is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(name);
}

/** The policy called `name`; throws a RangeError for an unknown name (a configuration error). */
export function getPolicy(name: string): PlannerPolicy {
  if (!isPolicyName(name)) throw new RangeError(`unknown planner policy "${name}" (known: ${POLICY_NAMES.join(", ")})`);
  return POLICIES[name];
}
