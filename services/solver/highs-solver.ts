/**
 * HiGHS (WASM) behind the planner's `SolveFn`, run in a worker thread so a solve never stalls
 * the event loop. A solve that throws, or outlives its time limit plus a grace period (the
 * worker is then replaced), resolves with status "Error" / "Timeout"; it never rejects.
 */
import { Worker } from "node:worker_threads";
import { performance } from "node:perf_hooks";
import highsModule from "highs";
import type { Highs } from "highs";
import type { MilpSolution, SolveOptions } from "../../actors/planner/solver.ts";
import { packageUrl } from "../files/package-root.ts";

// The package's types declare an ESM default export over a CommonJS file, so under NodeNext
// TypeScript sees the default import as the module object; at runtime it is the loader.
const loadHighs = ((highsModule as unknown as { default?: unknown }).default ?? highsModule) as () => Promise<Highs>;

/** A running solver: one worker thread, solves queued one at a time. */
export interface HighsSolver {
  /** Solves CPLEX LP text; resolves with an error status instead of rejecting. */
  solve(lp: string, opts?: SolveOptions): Promise<MilpSolution>;
  /** Stops the worker thread; pending solves resolve as "Error". */
  close(): Promise<void>;
}

/** Options of the solver wrapper. */
export interface HighsSolverOptions {
  /** Default HiGHS time limit per solve, seconds. */
  timeLimitS?: number;
  /** Wall-clock grace beyond the time limit before the worker is killed, ms. */
  graceMs?: number;
  /** Warm-up solves run when the worker starts (default 30; 0 = none). */
  warmupSolves?: number;
  /** Cap on warm-up time, ms (default 1500). */
  warmupMs?: number;
  /** Model solved to warm up (default `warmupModelLp()`, a small facility-location MILP). */
  warmupLp?: string;
}

/**
 * A small capacitated facility-location MILP (binaries, general integers, coupling rows) that
 * exercises the same HiGHS paths as the planner's model; used to warm the WASM code.
 */
export function warmupModelLp(facilities = 4, customers = 4): string {
  const obj: string[] = [];
  const rows: string[] = [];
  const generals: string[] = [];
  const binaries: string[] = [];
  for (let f = 0; f < facilities; f++) {
    obj.push(`${100 + 37 * ((f * 7) % facilities)} open_${f}`);
    binaries.push(`open_${f}`);
    const served: string[] = [];
    for (let c = 0; c < customers; c++) {
      obj.push(`${1 + ((f * 13 + c * 7) % 17)} ship_${f}_${c}`);
      generals.push(`ship_${f}_${c}`);
      served.push(`ship_${f}_${c}`);
    }
    rows.push(` cap_${f}: ${served.join(" + ")} - ${20 + (f % 3) * 7} open_${f} <= 0`);
  }
  for (let c = 0; c < customers; c++) {
    rows.push(` dem_${c}: ${Array.from({ length: facilities }, (_, f) => `ship_${f}_${c}`).join(" + ")} >= ${3 + (c % 5)}`);
  }
  return [
    "Minimize",
    ` obj: ${obj.join(" + ")}`,
    "Subject To",
    ...rows,
    "Binaries",
    ` ${binaries.join(" ")}`,
    "Generals",
    ` ${generals.join(" ")}`,
    "End",
    "",
  ].join("\n");
}

/**
 * HiGHS defaults for the planner's small MILPs. Feasibility jump and the primal heuristics
 * cost ~100 ms of fixed time per solve in WASM and buy nothing on models this small
 * (measured: 16-worker solves went from 24–138 ms to 7–24 ms without them).
 */
export const PLANNER_HIGHS_DEFAULTS: Record<string, string | number | boolean> = {
  mip_heuristic_run_feasibility_jump: false,
  mip_heuristic_effort: 0,
};

/** HiGHS option names for our solve options. */
export function highsOptions(
  opts: SolveOptions,
  defaultTimeLimitS: number,
): Record<string, string | number | boolean> & { time_limit: number } {
  const out: Record<string, string | number | boolean> & { time_limit: number } = {
    ...PLANNER_HIGHS_DEFAULTS,
    time_limit: opts.timeLimitS ?? defaultTimeLimitS,
  };
  if (opts.mipRelGap !== undefined) out.mip_rel_gap = opts.mipRelGap;
  if (opts.mipAbsGap !== undefined) out.mip_abs_gap = opts.mipAbsGap;
  return { ...out, ...(opts.highs ?? {}) };
}

interface Pending {
  id: number;
  lp: string;
  options: Record<string, string | number | boolean>;
  wallLimitMs: number;
  resolve: (s: MilpSolution) => void;
  startedAt?: number;
  /** The worker the solve was sent to: a replaced worker's late exit must not fail a newer solve. */
  worker?: Worker;
}

/** Starts a HiGHS worker thread and returns its solver handle. */
export function createHighsSolver(options: HighsSolverOptions = {}): HighsSolver {
  const defaultLimit = options.timeLimitS ?? 5;
  const graceMs = options.graceMs ?? 2000;
  const queue: Pending[] = [];
  let active: Pending | undefined;
  let worker: Worker | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let nextId = 1;

  const failure = (status: string, error: string, startedAt?: number): MilpSolution => ({
    status,
    objective: null,
    columns: {},
    solveMs: startedAt === undefined ? 0 : performance.now() - startedAt,
    error,
  });

  const finish = (solution: MilpSolution) => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const done = active;
    active = undefined;
    done?.resolve(solution);
    pump();
  };

  const spawn = (): Worker => {
    const w = new Worker(packageUrl("services", "solver", "highs-worker.mjs"), {
      workerData: {
        warmupLp: options.warmupLp ?? warmupModelLp(),
        warmupSolves: options.warmupSolves ?? 30,
        warmupMs: options.warmupMs ?? 1500,
        options: PLANNER_HIGHS_DEFAULTS,
      },
    });
    w.unref();
    w.on("message", (msg: { id: number; solution: MilpSolution }) => {
      if (active?.worker === w && msg.id === active.id) finish(msg.solution);
    });
    w.on("error", (err) => {
      if (worker === w) worker = undefined;
      if (active?.worker === w) finish(failure("Error", `solver worker failed: ${err.message}`, active.startedAt));
    });
    w.on("exit", (code) => {
      if (worker === w) worker = undefined;
      if (active?.worker === w) finish(failure("Error", `solver worker exited with code ${code}`, active.startedAt));
    });
    return w;
  };

  const pump = () => {
    if (active || closed) return;
    const next = queue.shift();
    if (!next) return;
    active = next;
    worker ??= spawn();
    next.startedAt = performance.now();
    const w = worker;
    next.worker = w;
    timer = setTimeout(() => {
      if (active !== next) return;
      worker = undefined;
      finish(failure("Timeout", `no answer within ${next.wallLimitMs} ms; worker replaced`, next.startedAt));
      void w.terminate();
    }, next.wallLimitMs);
    w.postMessage({ id: next.id, lp: next.lp, options: next.options });
  };

  // Spawn now so the WASM module is compiled before the first control tick needs it.
  worker = spawn();

  return {
    solve(lp, opts = {}) {
      if (closed) return Promise.resolve(failure("Error", "solver closed"));
      return new Promise<MilpSolution>((resolve) => {
        const hopts = highsOptions(opts, defaultLimit);
        queue.push({ id: nextId++, lp, options: hopts, wallLimitMs: hopts.time_limit * 1000 + graceMs, resolve });
        pump();
      });
    },
    async close() {
      closed = true;
      for (const p of queue.splice(0)) p.resolve(failure("Error", "solver closed"));
      if (active) finish(failure("Error", "solver closed", active.startedAt));
      const w = worker;
      worker = undefined;
      if (w) await w.terminate();
    },
  };
}

/**
 * HiGHS on the calling thread (blocks the event loop for the solve): for tests, offline
 * tools and the benchmark's comparison. Same contract as the worker-thread solver.
 */
export async function createInlineHighsSolver(options: HighsSolverOptions = {}): Promise<HighsSolver> {
  const highs = await loadHighs();
  const defaultLimit = options.timeLimitS ?? 5;
  return {
    async solve(lp, opts = {}) {
      const started = performance.now();
      try {
        const result = highs.solve(lp, { output_flag: false, ...highsOptions(opts, defaultLimit) } as Parameters<Highs["solve"]>[1]);
        const columns: Record<string, number> = {};
        for (const [name, col] of Object.entries(result.Columns ?? {})) {
          const primal = (col as { Primal?: number }).Primal;
          if (typeof primal === "number") columns[name] = primal;
        }
        const has = Object.keys(columns).length > 0;
        return { status: result.Status, objective: has ? result.ObjectiveValue : null, columns, solveMs: performance.now() - started };
      } catch (err) {
        return {
          status: "Error",
          objective: null,
          columns: {},
          solveMs: performance.now() - started,
          error: String((err as Error)?.message ?? err),
        };
      }
    },
    async close() {},
  };
}
