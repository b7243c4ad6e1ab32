/**
 * The artifact's rule-based allocators (Clipper, INFaaS-Acc, the round-robin fallback) and what
 * all its allocators share: the model order, the FID weights, the queue-delay estimate.
 */
import type { ModelProfile } from "../../contracts/profile.ts";
import { batchLatencyMs, batchSizesOf, type ProfileSet } from "../profile/profile-set.ts";
import type { PlanDecision } from "../planner/decision.ts";
import type { PlannerSnapshot } from "../planner/snapshot.ts";

/**
 * The FID each allocator weighs a model by, per reference id (`fid_weighting` in
 * `controller/controller.py`; sd3.5-large-turbo is 25.13 there, 25.23 in the FID tables).
 */
export const ARTIFACT_FID_WEIGHT: Readonly<Record<number, number>> = { 0: 29.76, 1: 25.13, 2: 20.61, 3: 19.95 };

/** The artifact's model order (`CASCADE_MODEL_ORDER`): by reference id, models without one last in pool order. */
export function modelOrder(profiles: ProfileSet): ModelProfile[] {
  const rank = (m: ModelProfile) => m.referenceId ?? 1_000 + profiles.models.indexOf(m);
  return [...profiles.models].sort((a, b) => rank(a) - rank(b));
}

/** A model's FID weight: the artifact's, else its FID alone. */
export function fidWeight(m: ModelProfile): number {
  return (m.referenceId !== undefined ? ARTIFACT_FID_WEIGHT[m.referenceId] : undefined) ?? m.fidAlone ?? Number.POSITIVE_INFINITY;
}

/** The planners' latency of a batch, seconds (the profiles given to the allocators carry the rounding when it is on). */
export function latencyS(snapshot: PlannerSnapshot, m: ModelProfile, b: number): number {
  return batchLatencyMs(m, b, snapshot.timeScale) / 1000;
}

/**
 * Little's-law queue delay in seconds from the controller's EWMAs: 1.2 × queue / arrivals, 0 with
 * no arrivals; `hadisGuard` also gives 0 under one queued query (`solve_milp_loop`'s guard).
 */
export function queueDelayS(snapshot: PlannerSnapshot, model: string, hadisGuard = false): number {
  const q = snapshot.signals?.queueLength[model] ?? 0;
  const a = snapshot.signals?.arrivals[model] ?? 0;
  if (a === 0 || (hadisGuard && q < 1)) return 0;
  return (1.2 * q) / a;
}

/** The largest batch whose planner latency fits the SLO (1 when none does): Clipper's and INFaaS's batch. */
export function largestFittingBatch(snapshot: PlannerSnapshot, m: ModelProfile): number | null {
  const fits = batchSizesOf(m).filter((b) => latencyS(snapshot, m, b) <= snapshot.sloMs / 1000);
  return fits.length > 0 ? fits[fits.length - 1] : null;
}

/** The pool model with reference id `id` (the artifact's model index), if any. */
export function modelById(profiles: ProfileSet, id: number): ModelProfile | undefined {
  const name = profiles.nameByReferenceId.get(id);
  return name ? profiles.byName.get(name) : undefined;
}

/** Several models sharing traffic by worker count (`routerMode: "workers"`); `models` in assignment order. */
export function sharedByWorkers(
  profiles: ProfileSet,
  models: Record<string, { workers: number; batchSize: number }>,
  reason: string,
): PlanDecision {
  const used = modelOrder(profiles).filter((m) => (models[m.name]?.workers ?? 0) > 0);
  const total = used.reduce((s, m) => s + models[m.name].workers, 0);
  const light = used[0]?.name ?? profiles.models[0].name;
  const heavy = used[used.length - 1]?.name ?? light;
  return {
    pair: { light, heavy },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: total > 0 && light !== heavy ? models[heavy].workers / total : 0,
    expectedFid: Number.NaN,
    models: Object.fromEntries(Object.entries(models).filter(([, a]) => a.workers > 0)),
    reason,
    degraded: 0,
    routerMode: "workers",
  };
}

/** The controllers' fallback when an allocator returns nothing (no demand yet): worker i on model i mod 4, batch 1. */
export function roundRobin(snapshot: PlannerSnapshot, profiles: ProfileSet, why: string): PlanDecision {
  const order = modelOrder(profiles);
  const models: Record<string, { workers: number; batchSize: number }> = {};
  for (const m of order) models[m.name] = { workers: 0, batchSize: 1 };
  snapshot.workers.forEach((_, i) => models[order[i % order.length].name].workers++);
  return sharedByWorkers(profiles, models, `${why}: round-robin over ${order.map((m) => m.name).join(", ")} at batch 1`);
}

/** Every worker on one model at one batch size. */
export function allOn(snapshot: PlannerSnapshot, m: ModelProfile, batchSize: number, reason: string): PlanDecision {
  return {
    pair: { light: m.name, heavy: m.name },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: 0,
    expectedFid: m.fidAlone ?? Number.NaN,
    models: { [m.name]: { workers: snapshot.workers.length, batchSize } },
    reason,
    degraded: 0,
  };
}

/** Clipper (`allocateByStaticModel`): every worker on one model at the largest batch that fits the SLO. */
export function clipperDecision(snapshot: PlannerSnapshot, profiles: ProfileSet, which: "light" | "heavy"): PlanDecision {
  const order = modelOrder(profiles);
  const m = which === "light" ? (modelById(profiles, 0) ?? order[0]) : (modelById(profiles, 3) ?? order[order.length - 1]);
  const b = largestFittingBatch(snapshot, m) ?? 1;
  return allOn(snapshot, m, b, `clipper-${which} (artifact): all ${snapshot.workers.length} workers on ${m.name} at batch ${b}`);
}

/** INFaaS-Acc's constants at QUALITY_BIAS 0.5 (`controller/infaas.py`). */
export const INFAAS_ARTIFACT = {
  queueWeight: 0.4 - 0.35 * 0.5,
  stepDownAtSlo: 0.85 + 0.3 * 0.5,
  stepUpBelowSlo: 0.8 + 0.18 * 0.5,
  criticalQueue: Math.trunc(20 + 80 * 0.5),
} as const;

/**
 * INFaaS-Acc (`solve_infaas_accuracy`): the variant in force (the last plan's, else the most
 * accurate) steps on expected latency; no capacity check. Before any demand: the round-robin fallback.
 */
export function infaasDecision(snapshot: PlannerSnapshot, profiles: ProfileSet): PlanDecision {
  if (snapshot.demandQps === 0) return roundRobin(snapshot, profiles, "infaas-acc (artifact): no demand yet");
  const byFid = [...profiles.models].sort((a, b) => fidWeight(a) - fidWeight(b));
  const worst = byFid.length - 1;
  const current = snapshot.current;
  const held =
    current?.policy === "infaas-acc" && current.pair.light === current.pair.heavy
      ? byFid.findIndex((m) => m.name === current.pair.light)
      : -1;
  let idx = Math.max(0, held);
  let bs = largestFittingBatch(snapshot, byFid[idx]);
  if (bs === null) {
    idx = Math.min(idx + 1, worst);
    bs = largestFittingBatch(snapshot, byFid[idx]);
    if (bs === null) return roundRobin(snapshot, profiles, "infaas-acc (artifact): no model fits the SLO");
  }
  const workers = snapshot.workers.length;
  const totalQueue = Object.values(snapshot.signals?.queueLength ?? {}).reduce((s, q) => s + q, 0);
  const lat = latencyS(snapshot, byFid[idx], bs);
  const throughput = (workers * bs) / lat;
  const expected = lat + (throughput > 0 ? (INFAAS_ARTIFACT.queueWeight * totalQueue) / throughput : Number.POSITIVE_INFINITY);
  const slo = snapshot.sloMs / 1000;
  const from = byFid[idx].name;
  let step = "hold";
  if (totalQueue > INFAAS_ARTIFACT.criticalQueue) {
    idx = worst;
    step = `queue ${totalQueue.toFixed(1)} > ${INFAAS_ARTIFACT.criticalQueue}: jump`;
  } else if (expected > slo * INFAAS_ARTIFACT.stepDownAtSlo && idx < worst) {
    idx++;
    step = "step down";
  } else if (expected <= slo * INFAAS_ARTIFACT.stepDownAtSlo && expected < slo * INFAAS_ARTIFACT.stepUpBelowSlo && idx > 0) {
    idx--;
    step = "step up";
  }
  const m = byFid[idx];
  const b = largestFittingBatch(snapshot, m);
  if (b === null) return roundRobin(snapshot, profiles, `infaas-acc (artifact): ${m.name} fits no batch`);
  return allOn(
    snapshot,
    m,
    b,
    `infaas-acc (artifact): ${step} ${from} → ${m.name} (expected ${expected.toFixed(2)} s, queue ${totalQueue.toFixed(1)})`,
  );
}
