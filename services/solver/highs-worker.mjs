/**
 * Worker-thread side of the HiGHS solver: loads the WASM solver once and answers
 * `{ id, lp, options }` messages with `{ id, solution }`; a solve blocks only this thread.
 * Plain JavaScript on purpose: on Node 20 a worker's `execArgv: ["--import", "tsx"]` does not
 * apply to the worker's entry module ("Unknown file extension .ts"), so a .ts entry cannot load.
 */
import { parentPort, workerData } from "node:worker_threads";
import { performance } from "node:perf_hooks";
import loadHighs from "highs";

/**
 * Loads HiGHS, then solves the warm-up model a few times: V8 first runs WASM through its
 * baseline compiler and tiers hot functions up later, so the first few dozen solves of a
 * fresh process run 3–10x slower. Warming here keeps that cost off the first control ticks.
 */
const highsReady = loadHighs().then((highs) => {
  const lp = workerData?.warmupLp;
  const deadline = performance.now() + (workerData?.warmupMs ?? 0);
  for (let i = 0; lp && i < (workerData?.warmupSolves ?? 0) && performance.now() < deadline; i++) {
    try {
      highs.solve(lp, { output_flag: false, time_limit: 1, ...(workerData?.options ?? {}) });
    } catch {
      break;
    }
  }
  return highs;
});

parentPort.on("message", async (req) => {
  const started = performance.now();
  try {
    const highs = await highsReady;
    const result = highs.solve(req.lp, { output_flag: false, ...req.options });
    /** @type {Record<string, number>} */
    const columns = {};
    for (const [name, col] of Object.entries(result.Columns ?? {})) {
      if (typeof col.Primal === "number") columns[name] = col.Primal;
    }
    const hasPrimal = Object.keys(columns).length > 0;
    parentPort.postMessage({
      id: req.id,
      solution: {
        status: result.Status,
        objective: hasPrimal && Number.isFinite(result.ObjectiveValue) ? result.ObjectiveValue : null,
        columns,
        solveMs: performance.now() - started,
      },
    });
  } catch (err) {
    parentPort.postMessage({
      id: req.id,
      solution: { status: "Error", objective: null, columns: {}, solveMs: performance.now() - started, error: String(err?.message ?? err) },
    });
  }
});
