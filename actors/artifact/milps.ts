/**
 * The artifact's three solver-based allocators as it formulates them (there with Gurobi, here
 * with HiGHS): HADIS's per-pair MILP, DiffServe's ILP and Proteus's ILP. Products of a worker
 * count and a batch choice are counted per (model, batch), which is the same model linearised.
 * Where the artifact's solver may return any of several optima, ties are broken in a stated way.
 */
import type { ModelProfile } from "../../contracts/profile.ts";
import type { ParetoRow } from "../profile/reference.ts";
import { batchSizesOf, type ProfileSet } from "../profile/profile-set.ts";
import { spreadLeftover, type ModelNeed, type PlanDecision } from "../planner/decision.ts";
import { LpBuilder, type Terms } from "../planner/lp-text.ts";
import type { PlannerSnapshot } from "../planner/snapshot.ts";
import { hasSolution, type SolveFn } from "../planner/solver.ts";
import { fidWeight, latencyS, modelById, modelOrder, queueDelayS, roundRobin, sharedByWorkers } from "./rules.ts";

const EXACT = { mipRelGap: 0, mipAbsGap: 1e-9 };

/** Per-(model, batch) terms: latency (s) and per-worker throughput (queries/s). */
function batchTerms(snapshot: PlannerSnapshot, m: ModelProfile): { b: number; lat: number; cap: number }[] {
  return batchSizesOf(m).map((b) => {
    const lat = latencyS(snapshot, m, b);
    return { b, lat, cap: lat > 0 ? b / lat : Number.POSITIVE_INFINITY };
  });
}

/** Gives workers the solver left free to the models in use (the artifact leaves them on their old model). */
function spread(
  snapshot: PlannerSnapshot,
  profiles: ProfileSet,
  counts: [string, number, number, number][],
): Record<string, { workers: number; batchSize: number }> {
  const needs: Record<string, ModelNeed> = {};
  for (const [name, workers, batchSize, loadQps] of counts) {
    const lat = latencyS(snapshot, profiles.byName.get(name)!, batchSize);
    needs[name] = { workers, batchSize, loadQps, capacityQps: batchSize / lat, batchMs: lat * 1000 };
  }
  const spreadOut = spreadLeftover(needs, snapshot.workers);
  // Keep the artifact's assignment order (light model first), not spreadLeftover's key order.
  return Object.fromEntries(counts.map(([name]) => [name, spreadOut[name]]));
}

/** The pair groups of a table in the order pandas' `groupby("model_combination")` visits them. */
function pairGroups(table: readonly ParetoRow[], ids: number): ParetoRow[][] {
  const key = (r: ParetoRow) => Array.from({ length: ids }, (_, i) => (i === r.lightId || i === r.heavyId ? "1" : "0")).join("");
  const groups = new Map<string, ParetoRow[]>();
  for (const r of table) {
    const k = key(r);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k)!.push(r);
  }
  return [...groups.keys()].sort().map((k) => groups.get(k)!);
}

/**
 * HADIS's allocator (`solve_milp_loop`): one MILP per model pair, the lowest FID wins. Light
 * capacity covers all of the demand (route ratio 1), the heavy model the row's heavy share; the
 * pair's batch latencies plus queue delays fit the SLO (no judge). Ties among a pair's optima:
 * fewest workers, then the leftover spread. Infeasible everywhere, or no demand: every worker on
 * the table's lightest model at batch 1, reported as shed (the table's worst FID).
 */
export async function hadisMilp(
  snapshot: PlannerSnapshot,
  profiles: ProfileSet,
  table: readonly ParetoRow[],
  solve: SolveFn,
): Promise<PlanDecision> {
  const W = snapshot.workers.length;
  const D = snapshot.demandQps;
  const slo = snapshot.sloMs / 1000;
  const usable = table.filter((r) => modelById(profiles, r.lightId) && modelById(profiles, r.heavyId));
  const ids = Math.max(4, ...usable.flatMap((r) => [r.lightId + 1, r.heavyId + 1]));
  let best: { fid: number; decision: PlanDecision } | null = null;
  let solveMs = 0;
  if (D > 0 && W > 0) {
    for (const rows of pairGroups(usable, ids)) {
      const light = modelById(profiles, rows[0].lightId)!;
      const heavy = modelById(profiles, rows[0].heavyId)!;
      const models = light === heavy ? [light] : [light, heavy];
      const ratio = (r: ParetoRow, m: ModelProfile) => (m === light ? 1 : Math.round(r.heavyShare * 100) / 100);
      const lp = new LpBuilder();
      const z = (k: number) => `z_${k}`;
      const b = (i: number, bs: number) => `b_${i}_${bs}`;
      const n = (i: number, bs: number) => `n_${i}_${bs}`;
      const objective: Terms = rows.map((r, k) => [Math.round(r.fid * 100) * (W + 1), z(k)]);
      rows.forEach((_, k) => lp.binary(z(k)));
      lp.constrain(
        "one_row",
        rows.map((_, k) => [1, z(k)]),
        "=",
        1,
      );
      const latency: Terms = [];
      const everyone: Terms = [];
      let delays = 0;
      models.forEach((m, i) => {
        const terms = batchTerms(snapshot, m);
        lp.constrain(
          `one_batch_${i}`,
          terms.map((t) => [1, b(i, t.b)]),
          "=",
          1,
        );
        for (const t of terms) {
          lp.binary(b(i, t.b)).integer(n(i, t.b), 0, W);
          lp.constrain(
            `on_${i}_${t.b}`,
            [
              [1, n(i, t.b)],
              [-W, b(i, t.b)],
            ],
            "<=",
            0,
          );
          latency.push([t.lat, b(i, t.b)]);
          everyone.push([1, n(i, t.b)]);
          objective.push([1, n(i, t.b)]);
        }
        lp.constrain(
          `cover_${i}`,
          [...terms.map((t): [number, string] => [t.cap, n(i, t.b)]), ...rows.map((r, k): [number, string] => [-D * ratio(r, m), z(k)])],
          ">=",
          0,
        );
        delays += queueDelayS(snapshot, m.name, true);
      });
      lp.constrain("workers", everyone, "<=", W);
      lp.constrain("slo", latency, "<=", slo - delays);
      lp.objectiveOf("Minimize", objective);
      const sol = await solve(lp.toString(), EXACT);
      solveMs += sol.solveMs;
      if (!hasSolution(sol)) continue;
      const k = rows.findIndex((_, i) => (sol.columns[z(i)] ?? 0) > 0.5);
      if (k < 0) continue;
      const row = rows[k];
      if (best && row.fid >= best.fid) continue;
      const counts: [string, number, number, number][] = models.map((m, i) => {
        const t = batchTerms(snapshot, m).find((t) => (sol.columns[b(i, t.b)] ?? 0) > 0.5)!;
        return [m.name, Math.round(sol.columns[n(i, t.b)] ?? 0), t.b, D * ratio(row, m)];
      });
      best = {
        fid: row.fid,
        decision: {
          pair: { light: light.name, heavy: heavy.name },
          routerThreshold: row.routerThreshold,
          discThreshold: row.discThreshold,
          heavyShare: row.heavyShare,
          expectedFid: row.fid,
          models: spread(snapshot, profiles, counts),
          reason: `artifact milp: ${light.name}→${heavy.name} r=${row.routerThreshold} d=${row.discThreshold} fid=${row.fid} at demand ${D.toFixed(1)}; ${counts.map(([m, x, bs]) => `${m} ${x}×b${bs}`).join(", ")}`,
          degraded: 0,
        },
      };
    }
  }
  if (best) return { ...best.decision, solveMs };
  // Shed (`allocateByMultiCascadeAlg`'s fallback): the lightest model of the table, no escalation.
  const lightest =
    modelOrder(profiles).find((m) => usable.some((r) => r.lightId === m.referenceId || r.heavyId === m.referenceId)) ??
    modelOrder(profiles)[0];
  const worst = usable.reduce((w, r) => Math.max(w, r.fid), Number.NEGATIVE_INFINITY);
  return {
    pair: { light: lightest.name, heavy: lightest.name },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: 0,
    expectedFid: Number.isFinite(worst) ? worst : (lightest.fidAlone ?? Number.NaN),
    models: { [lightest.name]: { workers: W, batchSize: 1 } },
    reason: `artifact milp: ${D > 0 ? "no feasible pair" : "no demand yet"}; shed: all ${W} workers on ${lightest.name} at batch 1`,
    degraded: 1,
    solveMs,
  };
}

/** FID of a plain cascade of the pair at heavy share `t` (`fid_vs_heavy_share`, linear between its 0.1 steps). */
function cascadeFid(profiles: ProfileSet, light: ModelProfile, heavy: ModelProfile, t: number): number {
  const curve = profiles.reference.fidVsHeavyShare
    .filter((r) => r.lightId === light.referenceId && r.heavyId === heavy.referenceId)
    .sort((a, b) => a.heavyShare - b.heavyShare);
  if (curve.length === 0) return Number.NaN;
  const i = curve.findIndex((r) => r.heavyShare >= t - 1e-9);
  if (i <= 0) return i === 0 ? curve[0].fid : curve[curve.length - 1].fid;
  const [a, b] = [curve[i - 1], curve[i]];
  return a.fid + ((b.fid - a.fid) * (t - a.heavyShare)) / (b.heavyShare - a.heavyShare);
}

/** DiffServe's threshold grid (`t_values`): 0 to 1 in steps of 0.005. */
const DIFFSERVE_GRID = Array.from({ length: 201 }, (_, i) => Math.round(0.005 * i * 10_000) / 10_000);

/**
 * DiffServe's allocator (`DiffServeILPAllocator`): the fixed pair (reference ids 1 → 3), the
 * highest escalation share t on the grid with light capacity ≥ demand, heavy capacity ≥ demand
 * × t and light + heavy latency + queue delays ≤ SLO. Before any demand: 9 and 7 workers (of 16)
 * at batch 8 escalating everything; infeasible: every worker light at batch 16, t = 0. Ties:
 * fewest workers, then the leftover spread.
 */
export async function diffserveIlp(snapshot: PlannerSnapshot, profiles: ProfileSet, solve: SolveFn): Promise<PlanDecision> {
  const light = modelById(profiles, 1) ?? modelOrder(profiles)[0];
  const heavy = modelById(profiles, 3) ?? modelOrder(profiles)[modelOrder(profiles).length - 1];
  const W = snapshot.workers.length;
  const D = snapshot.demandQps;
  const S = W + 1; // the artifact counts its sink among the servers
  const decision = (
    x1: number,
    b1: number,
    x2: number,
    b2: number,
    t: number,
    why: string,
    solveMs?: number,
    spreadIt = false,
  ): PlanDecision => {
    const counts: [string, number, number, number][] = [[light.name, x1, b1, D]];
    if (x2 > 0 || t > 0) counts.push([heavy.name, x2, b2, D * t]);
    const models = spreadIt
      ? spread(snapshot, profiles, counts)
      : Object.fromEntries(counts.map(([m, x, bs]) => [m, { workers: x, batchSize: bs }]));
    return {
      pair: { light: light.name, heavy: heavy.name },
      routerThreshold: 0,
      discThreshold: t,
      heavyShare: t,
      expectedFid: cascadeFid(profiles, light, heavy, t),
      models: Object.fromEntries(Object.entries(models).filter(([, a]) => a.workers > 0)),
      reason: `diffserve (artifact): ${why}; ${light.name} ${x1}×b${b1}, ${heavy.name} ${x2}×b${b2}, escalate ${t}`,
      degraded: 0,
      ...(solveMs !== undefined ? { solveMs } : {}),
    };
  };
  if (D === 0 || W === 0) {
    const x1 = Math.ceil(S / 2);
    return decision(x1, 8, Math.max(S - x1 - 1, 0), 8, 1, "no demand yet (initialize)");
  }
  const lp = new LpBuilder();
  const terms = [light, heavy].map((m) => batchTerms(snapshot, m));
  const b = (i: number, bs: number) => `b${i}_${bs}`;
  const n = (i: number, bs: number) => `n${i}_${bs}`;
  const t = (k: number) => `t_${k}`;
  const objective: Terms = DIFFSERVE_GRID.map((v, k) => [Math.round(v * 1000) * 5 * (W + 1), t(k)]);
  const latency: Terms = [];
  const everyone: Terms = [];
  terms.forEach((ts, i) => {
    lp.constrain(
      `one_batch_${i}`,
      ts.map((x) => [1, b(i, x.b)]),
      "<=",
      1,
    );
    for (const x of ts) {
      lp.binary(b(i, x.b)).integer(n(i, x.b), 0, W);
      lp.constrain(
        `on_${i}_${x.b}`,
        [
          [1, n(i, x.b)],
          [-W, b(i, x.b)],
        ],
        "<=",
        0,
      );
      latency.push([x.lat, b(i, x.b)]);
      everyone.push([1, n(i, x.b)]);
      objective.push([-1, n(i, x.b)]);
    }
  });
  DIFFSERVE_GRID.forEach((_, k) => lp.binary(t(k)));
  lp.constrain(
    "one_t",
    DIFFSERVE_GRID.map((_, k) => [1, t(k)]),
    "<=",
    1,
  );
  lp.constrain("workers", everyone, "<=", W);
  lp.constrain(
    "light_cover",
    terms[0].map((x) => [x.cap, n(0, x.b)]),
    ">=",
    D,
  );
  lp.constrain(
    "heavy_cover",
    [...terms[1].map((x): [number, string] => [x.cap, n(1, x.b)]), ...DIFFSERVE_GRID.map((v, k): [number, string] => [-D * v, t(k)])],
    ">=",
    0,
  );
  lp.constrain("slo", latency, "<=", snapshot.sloMs / 1000 - queueDelayS(snapshot, light.name) - queueDelayS(snapshot, heavy.name));
  lp.objectiveOf("Maximize", objective);
  const sol = await solve(lp.toString(), EXACT);
  if (!hasSolution(sol)) return decision(W, 16, 0, 1, 0, `ILP ${sol.status}: all light`, sol.solveMs);
  const pick = (i: number) => terms[i].find((x) => (sol.columns[b(i, x.b)] ?? 0) > 0.5);
  const workersAt = (i: number) => terms[i].reduce((s, x) => s + Math.round(sol.columns[n(i, x.b)] ?? 0), 0);
  const k = DIFFSERVE_GRID.findIndex((_, i) => (sol.columns[t(i)] ?? 0) > 0.5);
  const share = k >= 0 ? DIFFSERVE_GRID[k] : 0;
  const b2 = pick(1)?.b ?? snapshot.current?.models[heavy.name]?.batchSize ?? 8;
  return decision(workersAt(0), pick(0)?.b ?? 1, workersAt(1), b2, share, `demand ${D.toFixed(1)}`, sol.solveMs, true);
}

/** Proteus's demand headroom (`demand_weight`). */
export const PROTEUS_DEMAND_WEIGHT = 1.25;

/**
 * Proteus's allocator (`solve_proteus_milp`): the most inverse-FID-weighted workers with total
 * throughput ≥ 1.25 × demand; a batch is allowed when latency × (1 + queue delay) ≤ SLO. Every
 * worker then takes an equal share of the traffic. Ties: smaller batches. No demand: round robin;
 * infeasible (the artifact's controller raises there): the plan in force stays.
 */
export async function proteusIlp(snapshot: PlannerSnapshot, profiles: ProfileSet, solve: SolveFn): Promise<PlanDecision> {
  const W = snapshot.workers.length;
  const D = snapshot.demandQps;
  if (D === 0 || W === 0) return roundRobin(snapshot, profiles, "proteus (artifact): no demand yet");
  const slo = snapshot.sloMs / 1000;
  // The controller's model_names are sorted by name: that is the order workers are handed out in.
  const models = [...profiles.models].sort((a, b) => ((a.referenceName ?? a.name) < (b.referenceName ?? b.name) ? -1 : 1));
  const weights = models.map(fidWeight);
  const [fmin, fmax] = [Math.min(...weights), Math.max(...weights)];
  const inv = weights.map((f) => (fmax - fmin < 1e-9 ? 1 : (fmax - f) / (fmax - fmin + 1e-9)));
  const lp = new LpBuilder();
  const b = (i: number, bs: number) => `b_${i}_${bs}`;
  const n = (i: number, bs: number) => `n_${i}_${bs}`;
  const objective: Terms = [];
  const throughput: Terms = [];
  const everyone: Terms = [];
  const allowed = models.map((m) => batchTerms(snapshot, m).filter((x) => x.lat * (1 + queueDelayS(snapshot, m.name)) <= slo));
  allowed.forEach((ts, i) => {
    if (ts.length === 0) return;
    lp.constrain(
      `one_batch_${i}`,
      ts.map((x) => [1, b(i, x.b)]),
      "<=",
      1,
    );
    lp.constrain(
      `at_least_one_${i}`,
      [...ts.map((x): [number, string] => [1, n(i, x.b)]), ...ts.map((x): [number, string] => [-1, b(i, x.b)])],
      ">=",
      0,
    );
    ts.forEach((x, rank) => {
      lp.binary(b(i, x.b)).integer(n(i, x.b), 0, W);
      lp.constrain(
        `on_${i}_${x.b}`,
        [
          [1, n(i, x.b)],
          [-W, b(i, x.b)],
        ],
        "<=",
        0,
      );
      objective.push([inv[i], n(i, x.b)], [-1e-5 * (rank + 1), b(i, x.b)]);
      throughput.push([x.cap, n(i, x.b)]);
      everyone.push([1, n(i, x.b)]);
    });
  });
  const keep = (why: string): PlanDecision => ({
    ...(snapshot.current ? fromPlan(snapshot) : roundRobin(snapshot, profiles, "proteus (artifact)")),
    reason: `proteus (artifact): ${why}; the plan in force stays (the artifact's controller raises here)`,
    solverStatus: "Error",
  });
  if (everyone.length === 0) return keep("no batch fits the SLO");
  lp.constrain("workers", everyone, "<=", W);
  lp.constrain("demand", throughput, ">=", PROTEUS_DEMAND_WEIGHT * D);
  lp.objectiveOf("Maximize", objective);
  const sol = await solve(lp.toString(), EXACT);
  if (!hasSolution(sol)) return keep(`ILP ${sol.status} at demand ${D.toFixed(1)}`);
  const out: Record<string, { workers: number; batchSize: number }> = {};
  allowed.forEach((ts, i) => {
    const x = ts.find((x) => (sol.columns[b(i, x.b)] ?? 0) > 0.5);
    if (x) out[models[i].name] = { workers: Math.round(sol.columns[n(i, x.b)] ?? 0), batchSize: x.b };
  });
  const summary = Object.entries(out)
    .map(([m, a]) => `${m} ${a.workers}×b${a.batchSize}`)
    .join(", ");
  return {
    ...sharedByWorkers(profiles, out, `proteus (artifact): ${summary} for demand ${D.toFixed(1)} × ${PROTEUS_DEMAND_WEIGHT}`),
    solveMs: sol.solveMs,
  };
}

/** The plan in force as a decision (what a failed allocation leaves running). */
function fromPlan(snapshot: PlannerSnapshot): PlanDecision {
  const p = snapshot.current!;
  return {
    pair: p.pair,
    routerThreshold: p.routerThreshold,
    discThreshold: p.discThreshold,
    heavyShare: p.heavyShare,
    expectedFid: p.expectedFid ?? Number.NaN,
    models: p.models,
    reason: p.reason,
    degraded: p.degraded ?? 0,
    ...(p.routerMode ? { routerMode: p.routerMode } : {}),
  };
}
