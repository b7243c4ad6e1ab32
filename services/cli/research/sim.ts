/**
 * `hadis sim`: the anchor experiment on the discrete-event simulator (no NATS): each policy
 * over the trace with the live system's control tick, router scorer, judge and worker semantics.
 */
import { performance } from "node:perf_hooks";
import { basename } from "node:path";
import type { PromptAnalysis, PromptAnalyzer } from "../../../actors/analyzer/analyzer.ts";
import type { MilpSolution, SolveFn } from "../../../actors/planner/solver.ts";
import { ProfileJudge } from "../../../actors/judge/profile-judge.ts";
import { simulate, type SimConfig, type SimResult } from "../../../actors/sim/simulator.ts";
import { fidLookupFromProfiles } from "../../../actors/sim/scoring.ts";
import { parseFidelity, type Fidelity } from "../../../actors/artifact/mechanisms.ts";
import { CLAIRVOYANT } from "../../../actors/artifact/policies.ts";
import { futureDemandOracle } from "../../../actors/sim/trace.ts";
import { scoreWithFidelity } from "../../../actors/artifact/score-run.ts";
import { loadPromptAnalyzer } from "../../files/analyzer-files.ts";
import { defaultScorerFor, routerScoring, type ScorerKind } from "../../files/router-scoring.ts";
import { createInlineHighsSolver } from "../../solver/highs-solver.ts";
import { loadProfiles } from "../../files/profiles.ts";
import {
  loadWorkload,
  policiesFor,
  sloOf,
  renderTable,
  summarize,
  writePlots,
  writeReport,
  type E1Options,
  type SystemSummary,
} from "./e1-report.ts";

/** The analyzer with its answers remembered: the nine runs score the same prompts. */
export function memoizedAnalyzer(analyzer: PromptAnalyzer = loadPromptAnalyzer()): PromptAnalyzer {
  const cache = new Map<string, PromptAnalysis>();
  return {
    scoreModel: analyzer.scoreModel,
    analyzePrompt(prompt) {
      let hit = cache.get(prompt);
      if (!hit) cache.set(prompt, (hit = analyzer.analyzePrompt(prompt)));
      return hit;
    },
  };
}

/** Inputs of one simulated policy run with the live defaults (the rest of `SimConfig` is derived). */
export type SimRunInput = Pick<
  SimConfig,
  | "profiles"
  | "arrivals"
  | "prompts"
  | "workers"
  | "sloMs"
  | "timeScale"
  | "seed"
  | "purgeFinished"
  | "fidelity"
  | "deadlineAware"
  | "fitBatches"
  | "planner"
  | "control"
> & {
  policy: string;
  analyzer: PromptAnalyzer;
  /** The router's scorer (default `analyzer`) and, for `learned`, its model file. */
  scorer?: ScorerKind;
  difficultyModel?: string;
  /** Told the wall time of every MILP solve, ms (the scale bench's timing; the solve runs inline, so wall is the planner's cost). */
  onSolve?: (wallMs: number, solution: MilpSolution) => void;
};

/** Simulates one policy with a fresh router threshold, judge and solver. */
export async function runSimulation(input: SimRunInput): Promise<SimResult> {
  const solver = await createInlineHighsSolver();
  const { policy, analyzer, scorer, difficultyModel, onSolve, ...given } = input;
  const solve: SolveFn = onSolve
    ? async (lp, o) => {
        const started = performance.now();
        const solution = await solver.solve(lp, o);
        onSolve(performance.now() - started, solution);
        return solution;
      }
    : (lp, o) => solver.solve(lp, o);
  return simulate({
    ...given,
    policyName: policy,
    solve,
    ...routerScoring(scorer ?? defaultScorerFor(policy), input.profiles, {
      analyzer,
      ...(difficultyModel ? { difficultyModelPath: difficultyModel } : {}),
    }),
    judge: new ProfileJudge(input.profiles, { latencyMs: 0, sleep: async () => undefined }),
    judgeLatencyMs: input.profiles.pool.judge.latencyMs * input.timeScale,
    // The bound knows the rate of the coming tick plus the slowest load (its plan must carry that until the next can take over).
    ...(policy === CLAIRVOYANT
      ? {
          demandOracle: futureDemandOracle(
            input.arrivals,
            Math.max(500, 20_000 * input.timeScale) +
              Math.max(...input.profiles.models.map((m) => m.loadMs + m.unloadMs)) * input.timeScale,
          ),
        }
      : {}),
  });
}

/** Runs `hadis sim`. */
export async function simCommand(
  opts: E1Options & { keepFinished?: boolean; scorer?: ScorerKind; difficultyModel?: string },
): Promise<void> {
  const profiles = loadProfiles();
  const sloMs = sloOf(opts, profiles.pool);
  const { arrivals, prompts } = loadWorkload(opts);
  const analyzer = memoizedAnalyzer();
  const fidelity: Fidelity = parseFidelity(opts.fidelity, opts.mechanisms);
  const systems: SystemSummary[] = [];
  const started = performance.now();
  for (const policy of policiesFor(opts.policy)) {
    const t0 = performance.now();
    const run = await runSimulation({
      policy,
      profiles,
      analyzer,
      arrivals,
      prompts,
      workers: opts.workers,
      sloMs,
      timeScale: opts.timeScale,
      seed: opts.seed ?? 1,
      purgeFinished: !opts.keepFinished,
      fidelity,
      scorer: opts.scorer,
      difficultyModel: opts.difficultyModel,
    });
    const score = scoreWithFidelity({
      policy,
      records: run.records,
      plans: run.plans,
      sloMs,
      fid: fidLookupFromProfiles(profiles),
      fidelity,
      rows: run.rows,
      profiles,
    });
    systems.push(
      summarize(
        policy,
        score,
        run.swaps,
        run.plans.map((p) => ({
          atMs: p.atMs,
          epoch: p.epoch,
          pair: `${p.pair.light}→${p.pair.heavy}`,
          expectedFid: p.expectedFid,
          degraded: p.degraded,
          reason: p.reason,
        })),
      ),
    );
    process.stderr.write(
      `sim ${policy}: ${((performance.now() - t0) / 1000).toFixed(1)} s, ${run.plans.length} plans, ${run.ticks} ticks, ` +
        `${run.expiredDrops} expired drops, ${run.escalationsSkipped} escalations skipped, ${run.rescues} late heavy images raced by the light model, ${run.batchesFitted} batches fitted to their deadlines, ${run.lightFallbacks} light images served as the deadline neared, ${run.movedItems} moved, ${run.wastedItems} wasted, left in queues ${JSON.stringify(run.leftInQueue)}\n`,
    );
    // Every request ends by its deadline; one without an outcome is a simulator bug, scored as dropped.
    if (run.unfinished > 0) process.stderr.write(`sim ${policy}: WARNING ${run.unfinished} requests never ended (scored as dropped)\n`);
  }
  const wallS = (performance.now() - started) / 1000;
  process.stdout.write(renderTable(systems) + "\n");
  process.stdout.write(
    `simulated ${systems.length} polic${systems.length === 1 ? "y" : "ies"} × ${arrivals.length} arrivals in ${wallS.toFixed(1)} s wall\n`,
  );
  const report = {
    trace: opts.trace,
    sloMs,
    workers: opts.workers,
    timeScale: opts.timeScale,
    seed: opts.seed,
    fidelity: fidelity.name,
    mechanisms: [...fidelity.on],
    scorer: opts.scorer ?? "by policy (learned for hadis-plus, analyzer otherwise)",
    mode: opts.keepFinished ? "sim (what-if: work of finished requests kept in the queues)" : "sim",
    wallS,
    systems,
  };
  if (opts.json) process.stdout.write(`wrote ${writeReport(opts.json, report)}\n`);
  if (opts.plots ?? systems.length > 1) {
    const name = basename(opts.trace).replace(/\.[^.]+$/, "");
    const tag = fidelity.name === "native" ? "" : `-${fidelity.name === "artifact" ? "artifact" : "mech-" + [...fidelity.on].join("-")}`;
    const paths = await writePlots(
      systems,
      `sim-${name}${tag}${opts.keepFinished ? "-kept" : ""}`,
      `simulator, ${name}, ${opts.workers} workers, SLO ${sloMs} ms, ${fidelity.name} fidelity`,
    );
    process.stdout.write(`plots: ${paths.join(", ")}\n`);
  }
}
