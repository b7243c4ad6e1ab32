/**
 * The resource manager's MILP, written as CPLEX LP text for HiGHS. One solve chooses the
 * table row (pair, router share, discriminator share), each model's batch size and its
 * worker count at that batch size.
 *
 * Variables: x_t (binary, row t chosen), y_k_b (binary, model k runs batch b), n_k_b (integer,
 * workers of model k at batch b, 0 unless y_k_b), v_k (continuous, workers that must load k).
 * Workers are counted per (model, batch), so coverage is a linear sum of precomputed
 * per-worker capacities: no product of binaries needs linearising and the LP relaxation stays
 * tight. Batch latencies that alone break the SLO get no variable at all.
 */
import type { ParetoRow } from "../profile/reference.ts";
import { batchLatencyMs, batchSizesOf, type ProfileSet } from "../profile/profile-set.ts";
import {
  degradedDecision,
  resolveRows,
  spreadLeftover,
  workerCapacityQps,
  type ModelNeed,
  type PlanDecision,
  type ResolvedRow,
} from "./decision.ts";
import { holdingCounts, type PlannerSnapshot } from "./snapshot.ts";
import { hasSolution, type SolveFn, type SolveOptions } from "./solver.ts";

/** Options of the model builder. */
export interface MilpOptions {
  /** Whether escalated requests pass the judge (false for no-cascade policies). Default true. */
  judge?: boolean;
  /** Judge latency, ms; default the pool's judge latency times the time scale. */
  judgeMs?: number;
  /** Multiplies the demand to keep headroom for a rising EWMA. Default 1. */
  demandFactor?: number;
  /** Adds the per-model minimum-worker cuts (default true; off only to measure them). */
  cuts?: boolean;
  /**
   * Prices swaps inside the objective instead of only breaking ties with them: a worker that must
   * load model k costs its load (and the unload before it) as a share of the pool's capacity over
   * `horizonMs`, times `fidPerLostCapacity`, in FID; and while it loads it carries only the part of
   * the next `tickMs` it can still serve, so coverage counts loading workers at that part
   * (unless `coverLoading` is false).
   */
  swapAware?: { horizonMs: number; tickMs: number; fidPerLostCapacity: number; coverLoading?: boolean };
  /**
   * Plan-aware backlog: a model whose queue reads longer than one of `budgetsMs` may still be
   * chosen if the plan gives it the capacity to clear that queue (depth × `safety`) within the
   * budget, on top of its load; its path then counts the budget as its queueing. Without it a
   * backlog counts at the wait the current capacity gives it (Little's law), and the planner
   * flees a model that is behind to an idle one, however much worse its FID, when adding
   * workers would do.
   */
  drain?: { budgetsMs: readonly number[]; safety: number };
  /**
   * Which batch size breaks a tie between plans of equal FID and swaps: the shorter (default),
   * or the larger whose latency still fits the path (hadis-plus under per-worker queues, see
   * `hadisPlusOptions`).
   */
  batchTieBreak?: "shorter" | "larger";
}

/** One (model, batch) choice the solver may take. */
interface BatchTerm {
  b: number;
  latencyMs: number;
  capacityQps: number;
  /** Upper bound on workers useful at this batch size. */
  maxWorkers: number;
}

/** One model that some surviving row uses. */
interface ModelTerm {
  name: string;
  index: number;
  queueMs: number;
  holding: number;
  batches: BatchTerm[];
  /** Ways to clear the backlog faster than observed: a budget (ms of wait) and the extra capacity it needs, qps. */
  drains: { budgetMs: number; qps: number }[];
}

/** A built model: LP text plus the decoder of its solution. */
export interface MilpModel {
  /** CPLEX LP text; empty when `rowCount` is 0. */
  lp: string;
  /** Rows that survived the pre-checks (0 → infeasible without solving). */
  rowCount: number;
  /** Why rows were dropped, for the degraded reason. */
  pruned: string;
  /** Turns primal values into a decision (null if no row is selected). */
  decode(columns: Record<string, number>): PlanDecision | null;
}

const fmt = (x: number) => {
  const s = Number(x.toPrecision(12)).toString();
  return s.includes("e") ? x.toFixed(12).replace(/0+$/, "").replace(/\.$/, "") : s;
};

/** Writes `c1 v1 + c2 v2 …` with line breaks so no LP line grows long. */
function linear(terms: [number, string][]): string {
  const parts: string[] = [];
  terms.forEach(([c, v], i) => {
    if (c === 0) return;
    const sign = c < 0 ? "-" : parts.length === 0 ? "" : "+";
    const mag = Math.abs(c) === 1 ? "" : `${fmt(Math.abs(c))} `;
    parts.push(`${sign}${sign ? " " : ""}${mag}${v}${(i + 1) % 8 === 0 ? "\n  " : ""}`);
  });
  return parts.length > 0 ? parts.join(" ") : "0 x_0";
}

/** Builds the MILP for one tick over `table` (a Pareto lookup table or grid rows). */
export function buildMilp(snapshot: PlannerSnapshot, profiles: ProfileSet, table: ParetoRow[], options: MilpOptions = {}): MilpModel {
  const workers = snapshot.workers.length;
  const demand = Math.max(0, snapshot.demandQps) * (options.demandFactor ?? 1);
  const judgeMs = options.judge === false ? 0 : (options.judgeMs ?? profiles.pool.judge.latencyMs * snapshot.timeScale);
  const slo = snapshot.sloMs;
  const resolved = resolveRows(table, profiles);
  /** The queue wait at the capacity the model has now (Little's law × safety). */
  const observedQueueMs = (m: string) => Math.max(0, snapshot.queueDelayMs[m] ?? 0);
  /** The drain budgets shorter than the model's observed wait, each with the capacity it needs on top of the load. */
  const drainsOf = (m: string) => {
    const depth = snapshot.queueDepth[m] ?? 0;
    if (!options.drain || !(depth > 0)) return [];
    const { budgetsMs, safety } = options.drain;
    return budgetsMs
      .filter((b) => b > 0 && b < observedQueueMs(m))
      .map((budgetMs) => ({ budgetMs, qps: (depth * safety * 1000) / budgetMs }));
  };
  /** The least queue wait a plan can give the model: its shortest drain budget, or as observed. */
  const queueMs = (m: string) => Math.min(observedQueueMs(m), ...drainsOf(m).map((d) => d.budgetMs));
  const holding = holdingCounts(snapshot.workers);

  // Batch sizes a model may run: batch latency + its queue delay fits the SLO (the judge's time
  // counts on a cascade's path, in the row filter below and the path constraint).
  const allowed = new Map<string, BatchTerm[]>();
  const batchesOf = (m: string): BatchTerm[] => {
    const hit = allowed.get(m);
    if (hit) return hit;
    const p = profiles.byName.get(m)!;
    const terms = batchSizesOf(p)
      .map((b) => ({
        b,
        latencyMs: batchLatencyMs(p, b, snapshot.timeScale),
        capacityQps: workerCapacityQps(p, b, snapshot.timeScale),
        maxWorkers: 0,
      }))
      .filter((t) => t.latencyMs + queueMs(m) <= slo);
    allowed.set(m, terms);
    return terms;
  };
  const loads = (r: ResolvedRow): [string, number][] =>
    r.light === r.heavy
      ? [[r.light, 1]]
      : (
          [
            [r.light, r.lightLoad],
            [r.heavy, r.heavyLoad],
          ] as [string, number][]
        ).filter(([, s]) => s > 0);
  const minPath = (m: string) => Math.min(...batchesOf(m).map((t) => t.latencyMs)) + queueMs(m);
  const maxCap = (m: string) => Math.max(...batchesOf(m).map((t) => t.capacityQps));

  const drops = { latency: 0, capacity: 0 };
  const rows = resolved.filter((r) => {
    const used = loads(r);
    if (used.some(([m]) => batchesOf(m).length === 0)) return (drops.latency++, false);
    if (r.cascade && minPath(r.light) + minPath(r.heavy) + judgeMs > slo) return (drops.latency++, false);
    // Each model a row uses needs a worker even at zero demand (a model of the pair without one
    // would strand what is routed to it), and its load's worth above that.
    const need = used.reduce((s, [m, share]) => s + Math.max(1, Math.ceil((demand * share) / maxCap(m) - 1e-9)), 0);
    if (need > workers) return (drops.capacity++, false);
    return true;
  });
  const pruned = `${resolved.length} rows: ${drops.latency} break the SLO, ${drops.capacity} exceed ${workers} workers at ${demand.toFixed(1)} qps`;
  if (rows.length === 0) return { lp: "", rowCount: 0, pruned, decode: () => null };

  const modelNames = [...new Set(rows.flatMap((r) => loads(r).map(([m]) => m)))].sort(
    (a, b) => profiles.models.findIndex((p) => p.name === a) - profiles.models.findIndex((p) => p.name === b),
  );
  const swapAware = options.swapAware;
  /** A swap to `name`, ms of a worker's time lost (its unload and load). */
  const swapMsOf = (name: string) => {
    const p = profiles.byName.get(name)!;
    return (p.loadMs + p.unloadMs) * snapshot.timeScale;
  };
  /** Swap-aware: what a worker still loading `name` does not serve of the next tick, qps (at the model's best capacity, a safe bound). */
  // (Not for the first plan, which every worker loads: nothing serves before it either way.)
  const lostQpsOf = (name: string) =>
    swapAware && snapshot.current && swapAware.coverLoading !== false
      ? Math.min(1, swapMsOf(name) / Math.max(1, swapAware.tickMs)) * Math.max(...batchesOf(name).map((bt) => bt.capacityQps))
      : 0;
  /** The most workers of one batch size a plan can need: enough to cover `needQps` with those holding it serving and the rest loading. */
  const usefulWorkers = (capQps: number, needQps: number, held: number, lostQps: number) => {
    const enough = Math.ceil(needQps / capQps - 1e-9);
    if (lostQps <= 0 || enough <= held) return enough;
    return capQps > lostQps ? Math.ceil((needQps - lostQps * held) / (capQps - lostQps) - 1e-9) : held;
  };
  const models: ModelTerm[] = modelNames.map((name, index) => {
    const maxShare = Math.max(...rows.map((r) => loads(r).find(([m]) => m === name)?.[1] ?? 0));
    const drains = drainsOf(name);
    const drainQps = Math.max(0, ...drains.map((d) => d.qps));
    const need = demand * maxShare + drainQps;
    const batches = batchesOf(name).map((t) => ({
      ...t,
      maxWorkers: Math.min(workers, Math.max(1, usefulWorkers(t.capacityQps, need, holding[name] ?? 0, lostQpsOf(name)))),
    }));
    return { name, index, queueMs: observedQueueMs(name), holding: holding[name] ?? 0, batches, drains };
  });
  const byName = new Map(models.map((m) => [m.name, m]));
  const x = (t: number) => `x_${t}`;
  const y = (k: number, b: number) => `y_${k}_${b}`;
  const n = (k: number, b: number) => `n_${k}_${b}`;
  const v = (k: number) => `v_${k}`;
  const w = (k: number, j: number) => `w_${k}_${j}`;
  const drainVars = (m: ModelTerm) => m.drains.map((d, j) => ({ ...d, name: w(m.index, j) }));

  // Objective weights: FID dominates lexicographically (one 0.01 FID step outweighs every
  // swap), swaps outweigh the tie-break, the tie-break (± path latency / SLO + workers / S) is < 3.
  const swapWeight = 4;
  const fidStep = swapWeight * (workers + 1);
  const fidMin = Math.min(...rows.map((r) => r.row.fid));
  const objective: [number, string][] = rows.map((r, t) => [Math.round((r.row.fid - fidMin) * 100 * fidStep * 1000) / 1000, x(t)]);
  for (const m of models) {
    for (const bt of m.batches) {
      objective.push([(options.batchTieBreak === "larger" ? -bt.latencyMs : bt.latencyMs) / slo, y(m.index, bt.b)]);
      objective.push([1 / Math.max(1, workers), n(m.index, bt.b)]);
    }
    // In FID units scaled as the rows' FID (100 × fidStep per FID), or a tie-break without pricing.
    const priced = swapAware
      ? ((swapAware.fidPerLostCapacity * swapMsOf(m.name)) / (Math.max(1, workers) * swapAware.horizonMs)) * 100 * fidStep
      : 0;
    objective.push([Math.round((swapWeight + priced) * 1000) / 1000, v(m.index)]);
    for (const d of drainVars(m)) objective.push([0.5, d.name]);
  }

  const cons: string[] = [];
  cons.push(` one: ${linear(rows.map((_, t) => [1, x(t)]))} = 1`);
  for (const m of models) {
    const k = m.index;
    const usedBy = rows.map((r, t) => [r, t] as const).filter(([r]) => loads(r).some(([name]) => name === m.name));
    cons.push(
      ` batch_${k}: ${linear([...m.batches.map((bt) => [1, y(k, bt.b)] as [number, string]), ...usedBy.map(([, t]) => [-1, x(t)] as [number, string])])} = 0`,
    );
    for (const bt of m.batches)
      cons.push(
        ` link_${k}_${bt.b}: ${linear([
          [1, n(k, bt.b)],
          [-Math.max(bt.maxWorkers, 0), y(k, bt.b)],
        ])} <= 0`,
      );
    const demandTerms = usedBy.map(([r, t]) => [-demand * loads(r).find(([name]) => name === m.name)![1], x(t)] as [number, string]);
    // Swap-aware: a worker still loading serves only what is left of the next tick.
    const lost = lostQpsOf(m.name);
    const loading: [number, string][] = lost > 0 ? [[-lost, v(k)]] : [];
    // Draining: the backlog's worth of capacity on top of the load, and batch sizes that fit the
    // SLO only at the drain budget's wait are taken only in drain mode.
    const drained = drainVars(m).map((d) => [-d.qps, d.name] as [number, string]);
    cons.push(
      ` cover_${k}: ${linear([...m.batches.map((bt) => [bt.capacityQps, n(k, bt.b)] as [number, string]), ...loading, ...drained, ...demandTerms])} >= 0`,
    );
    if (m.drains.length > 0) {
      const ways = drainVars(m);
      cons.push(
        ` wused_${k}: ${linear([...ways.map((d) => [1, d.name] as [number, string]), ...m.batches.map((bt) => [-1, y(k, bt.b)] as [number, string])])} <= 0`,
      );
      for (const bt of m.batches)
        if (bt.latencyMs + m.queueMs > slo) {
          const fitting = ways.filter((d) => bt.latencyMs + d.budgetMs <= slo).map((d) => [-1, d.name] as [number, string]);
          cons.push(` wneed_${k}_${bt.b}: ${linear([[1, y(k, bt.b)], ...fitting])} <= 0`);
        }
    }
    // A used model gets at least one worker, even at zero demand. With cuts, at least
    // ceil(load / best per-worker capacity): a valid cut that makes the LP relaxation see
    // integer worker counts per row.
    const best = Math.max(...m.batches.map((bt) => bt.capacityQps));
    const minWorkers = usedBy.map(([r, t]) => {
      const atLeast =
        options.cuts === false ? 1 : Math.max(1, Math.ceil((demand * loads(r).find(([name]) => name === m.name)![1]) / best - 1e-9));
      return [-atLeast, x(t)] as [number, string];
    });
    cons.push(` minw_${k}: ${linear([...m.batches.map((bt) => [1, n(k, bt.b)] as [number, string]), ...minWorkers])} >= 0`);
    cons.push(` swap_${k}: ${linear([...m.batches.map((bt) => [1, n(k, bt.b)] as [number, string]), [-1, v(k)]])} <= ${m.holding}`);
  }
  cons.push(` total: ${linear(models.flatMap((m) => m.batches.map((bt) => [1, n(m.index, bt.b)] as [number, string])))} <= ${workers}`);
  // Slowest path of a cascade: light + judge + heavy batch latency and both queue delays. Only
  // the chosen pair has y = 1, so the sum over all models is exactly that path; rows without
  // escalation relax it (their single-model paths were checked when the y variables were made).
  if (rows.some((r) => r.cascade)) {
    // (A wait counts at most the SLO: beyond it every batch of the model needs a drain anyway, and
    // a wait of hours read off a stale queue would only inflate big-M and the coefficients.)
    const pathQueueMs = (m: ModelTerm) => Math.min(m.queueMs, slo);
    const pathTerms = models.flatMap((m) => m.batches.map((bt) => [bt.latencyMs + pathQueueMs(m), y(m.index, bt.b)] as [number, string]));
    const worst = models.map((m) => Math.max(...m.batches.map((bt) => bt.latencyMs)) + pathQueueMs(m)).sort((a, b) => b - a);
    const bigM = Math.max(0, (worst[0] ?? 0) + (worst[1] ?? 0) - (slo - judgeMs));
    const relax = rows.map((r, t) => [r.cascade ? 0 : -bigM, x(t)] as [number, string]);
    // A draining model's path counts the drain budget instead of the observed wait.
    const drainedWait = models.flatMap((m) => drainVars(m).map((d) => [-(pathQueueMs(m) - d.budgetMs), d.name] as [number, string]));
    cons.push(` slo: ${linear([...pathTerms, ...drainedWait, ...relax])} <= ${fmt(slo - judgeMs)}`);
  }

  const bounds: string[] = [];
  const binaries: string[] = rows.map((_, t) => x(t));
  const generals: string[] = [];
  for (const m of models) {
    for (const bt of m.batches) {
      bounds.push(` 0 <= ${n(m.index, bt.b)} <= ${Math.max(bt.maxWorkers, 0)}`);
      binaries.push(y(m.index, bt.b));
      generals.push(n(m.index, bt.b));
    }
    bounds.push(` ${v(m.index)} >= 0`);
  }
  binaries.push(...models.flatMap((m) => drainVars(m).map((d) => d.name)));
  const wrap = (names: string[]) => names.reduce((s, name, i) => s + (i % 10 === 0 ? "\n " : " ") + name, "");
  const lp = [
    "Minimize",
    ` obj: ${linear(objective)}`,
    "Subject To",
    ...cons,
    "Bounds",
    ...bounds,
    `Binaries${wrap(binaries)}`,
    `Generals${wrap(generals)}`,
    "End",
    "",
  ].join("\n");

  const decode = (columns: Record<string, number>): PlanDecision | null => {
    const val = (name: string) => columns[name] ?? 0;
    let chosen = -1;
    rows.forEach((_, t) => {
      if (val(x(t)) > 0.5 && (chosen < 0 || val(x(t)) > val(x(chosen)))) chosen = t;
    });
    if (chosen < 0) return null;
    const r = rows[chosen];
    const needs: Record<string, ModelNeed> = {};
    for (const [name, share] of loads(r)) {
      const m = byName.get(name)!;
      const bt = [...m.batches].sort((a, b) => val(y(m.index, b.b)) - val(y(m.index, a.b)))[0];
      needs[name] = {
        workers: m.batches.reduce((s, t) => s + Math.round(val(n(m.index, t.b))), 0),
        batchSize: bt.b,
        loadQps: demand * share,
        capacityQps: bt.capacityQps,
        batchMs: bt.latencyMs,
      };
    }
    const spread = spreadLeftover(needs, snapshot.workers);
    const minimal = Object.entries(needs)
      .map(([name, nd]) => `${name} ${nd.workers}×b${nd.batchSize}`)
      .join(", ");
    const drained = models.flatMap((m) =>
      drainVars(m)
        .filter((d) => val(d.name) > 0.5)
        .map((d) => `${m.name} clears its queue in ${d.budgetMs.toFixed(0)} ms`),
    );
    const reason = `milp: ${r.light}→${r.heavy} r=${r.row.routerThreshold} d=${r.row.discThreshold} fid=${r.row.fid} at ${demand.toFixed(1)} qps; minimal ${minimal}${drained.length > 0 ? `; ${drained.join(", ")}` : ""}; ${rows.length} candidate rows`;
    const used = Object.keys(needs);
    if (used.length === 1) {
      // One model serves everything (no cascade): the plan names it as both light and heavy.
      return {
        pair: { light: used[0], heavy: used[0] },
        routerThreshold: 0,
        discThreshold: 0,
        heavyShare: 0,
        expectedFid: r.row.fid,
        models: spread,
        reason,
        degraded: 0,
      };
    }
    return {
      pair: { light: r.light, heavy: r.heavy },
      routerThreshold: r.row.routerThreshold,
      discThreshold: r.row.discThreshold,
      heavyShare: r.row.heavyShare,
      expectedFid: r.row.fid,
      models: spread,
      reason,
      degraded: 0,
    };
  };
  return { lp, rowCount: rows.length, pruned, decode };
}

/** Default solve options: prove optimality (the lexicographic weights need a zero gap). */
export const DEFAULT_SOLVE_OPTIONS: SolveOptions = { timeLimitS: 2, mipRelGap: 0, mipAbsGap: 1e-4 };

/**
 * Plans one tick with the MILP over `table`: no live workers, no surviving row, an infeasible
 * solve or a solver failure all give the degraded plan; never throws.
 */
export async function planWithMilp(
  snapshot: PlannerSnapshot,
  profiles: ProfileSet,
  table: ParetoRow[],
  solve: SolveFn,
  options: MilpOptions & { solve?: SolveOptions } = {},
): Promise<PlanDecision> {
  if (snapshot.workers.length === 0) return degradedDecision(snapshot, profiles, table, "no live workers");
  let model: MilpModel;
  try {
    model = buildMilp(snapshot, profiles, table, options);
  } catch (err) {
    return degradedDecision(snapshot, profiles, table, `model build failed: ${(err as Error).message}`);
  }
  if (model.rowCount === 0) return degradedDecision(snapshot, profiles, table, `no feasible row (${model.pruned})`);
  let solution;
  try {
    solution = await solve(model.lp, options.solve ?? DEFAULT_SOLVE_OPTIONS);
  } catch (err) {
    return { ...degradedDecision(snapshot, profiles, table, `solver threw: ${(err as Error).message}`), solverStatus: "Error" };
  }
  const decision = hasSolution(solution) ? model.decode(solution.columns) : null;
  if (!decision) {
    const why =
      solution.status === "Infeasible"
        ? `infeasible (${model.pruned})`
        : `solver ${solution.status}${solution.error ? `: ${solution.error}` : ""}`;
    // A limit reached with no feasible point yet is a timeout: the plan in force stays.
    const status = /limit reached/i.test(solution.status) ? "Timeout" : solution.status;
    return { ...degradedDecision(snapshot, profiles, table, why), solveMs: solution.solveMs, solverStatus: status };
  }
  return { ...decision, solveMs: solution.solveMs, solverStatus: solution.status };
}

/**
 * A representative planner MILP (16 workers on mixed models, mid demand, the HADIS table) for
 * warming a fresh solver's WASM code before the first control tick.
 */
export function plannerWarmupLp(profiles: ProfileSet, workers = 16): string {
  const names = profiles.models.map((m) => m.name);
  const snapshot: PlannerSnapshot = {
    nowMs: 0,
    demandQps: 2 * workers,
    queueDepth: {},
    queueDelayMs: {},
    workers: Array.from({ length: workers }, (_, i) => ({ id: `warm-${i}`, model: names[i % names.length] ?? null })),
    current: null,
    sloMs: profiles.pool.sloMs * profiles.pool.defaultTimeScale,
    timeScale: profiles.pool.defaultTimeScale,
  };
  return buildMilp(snapshot, profiles, profiles.reference.paretoHybrid).lp;
}
