/**
 * `hadis bench e1`: the anchor experiment live. Replays a trace against `hadis.generate` (each
 * arrival at its time, with its prompt), records what scoring needs from each reply, follows the
 * plan in force (KV) for the cascade FID, and scores with the simulator's scoring. Runs against a
 * running system (`--nats`) or starts a nats-server and a fresh system per policy (`--embedded`).
 * Ctrl-C stops sending, waits for the requests in flight, and keeps what was recorded.
 */
import { performance } from "node:perf_hooks";
import { basename } from "node:path";
import { SingleBar, Presets } from "cli-progress";
import { asHadisError } from "../../../contracts/errors.ts";
import { subjects as buildSubjects } from "../../../contracts/subjects.ts";
import type { Plan } from "../../../contracts/messages.ts";
import { countSwaps } from "../../../actors/planner/assignment.ts";
import { referenceIndexFor, type ProfileSet } from "../../../actors/profile/profile-set.ts";
import type { Arrival } from "../../../actors/profile/reference.ts";
import { fidLookupFromProfiles, type PlanMark, type RequestRecord } from "../../../actors/sim/scoring.ts";
import { parseFidelity } from "../../../actors/artifact/mechanisms.ts";
import { scoreWithFidelity } from "../../../actors/artifact/score-run.ts";
import { rowsFromRecords } from "../../../actors/artifact/replay-ledger.ts";
import type { LedgerRow } from "../../../actors/artifact/ledger.ts";
import { ARTIFACT_STOP_AFTER_TRACE_MS, fidSourceOf } from "../../../actors/artifact/scoring.ts";
import { tableOf } from "../../../actors/artifact/policies.ts";
import { modelOrder } from "../../../actors/artifact/rules.ts";
import { HadisClient } from "../../client/client.ts";
import { createLogger } from "../../telemetry/log.ts";
import { connectNats } from "../../nats/connection.ts";
import { natsUrls } from "../credentials.ts";
import { startNatsServer } from "../../nats/server.ts";
import { PlanView } from "../../nats/plan-view.ts";
import { loadProfiles } from "../../files/profiles.ts";
import { sleep } from "../../lifecycle/running.ts";
import { startSystem, type RunningSystem } from "../../system.ts";
import type { ScorerKind } from "../../files/router-scoring.ts";
import {
  loadWorkload,
  policiesFor,
  sloOf,
  renderTable,
  summarize,
  writePlots,
  writeReport,
  type E1Options,
  type PlanLog,
  type SystemSummary,
} from "./e1-report.ts";

/** Options of `hadis bench e1`. */
export interface BenchE1Options extends E1Options {
  nats?: string;
  embedded?: boolean;
  /** The embedded systems' router scorer and, for `learned`, its model file. */
  scorer?: ScorerKind;
  difficultyModel?: string;
}

/** What one live replay recorded. */
export interface ReplayResult {
  records: RequestRecord[];
  plans: PlanMark[];
  /** Plans adopted during the replay. */
  planLog: PlanLog[];
  /** Workers reassigned by plan changes during the replay. */
  planSwaps: number;
  /** hadis-plus's admissions of the requests served, by choice (the replies' `admission`). */
  admissions: Record<string, number>;
  interrupted: boolean;
  /** The policy of the system replayed against (its first plan's). */
  policy: string;
  /** The SLO the requests were sent and judged with. */
  sloMs: number;
  /** The SLO the system's plan was made for. */
  planSloMs: number;
  /** The time scale of the system's first plan (its profiled latencies times it). */
  timeScale: number;
  /** Workers the system's first plan assigns a model. */
  workers: number;
  /** Every plan in force during the replay, from when it was seen (trace clock). */
  seen: { atMs: number; plan: Plan }[];
}

/** Replays `arrivals` against `hadis.generate` on `natsUrl`; `stop()` ends sending early. */
export async function replayTrace(opts: {
  natsUrl: string | string[];
  arrivals: readonly Arrival[];
  prompts: readonly string[];
  profiles: ProfileSet;
  /** Deadline and objective of each request; default the running plan's SLO. */
  sloMs?: number;
  /**
   * Each request's deadline in SLOs (default 1): 2 under the artifact's drops, where an answer after
   * the SLO still comes (and counts as timed out) and one that never comes is dropped.
   */
  deadlineSlos?: number;
  label: string;
  stopped: () => boolean;
}): Promise<ReplayResult> {
  const log = createLogger("bench-e1", "warn");
  const nc = await connectNats(opts.natsUrl, "hadis-bench-e1").catch((err: unknown) => {
    throw new Error(`cannot reach NATS at ${[opts.natsUrl].flat().join(",")} (${(err as Error).message}): is the system running there?`);
  });
  const client = new HadisClient(nc);
  const { view } = await PlanView.open(nc, buildSubjects(), log);
  const first = await view.waitForPlan(30_000);
  if (!first) throw new Error(`no plan on ${opts.natsUrl} within 30 s: is the resource manager running?`);
  const sloMs = opts.sloMs ?? first.sloMs;
  if (sloMs !== first.sloMs)
    process.stderr.write(`note: requests are sent and judged with --slo-ms ${sloMs}; the system plans for ${first.sloMs}\n`);
  const plans: PlanMark[] = [];
  const planLog: PlanLog[] = [];
  const seen: { atMs: number; plan: Plan }[] = [];
  let planSwaps = 0;
  let previous: Plan | null = null;
  let t0 = performance.now();
  view.onPlan((plan) => {
    if (previous) planSwaps += countSwaps(previous.assignment, plan.assignment);
    previous = plan;
    plans.push({ atMs: Math.max(0, performance.now() - t0), expectedFid: plan.expectedFid });
    seen.push({ atMs: Math.max(0, performance.now() - t0), plan });
    planLog.push({
      atMs: Math.max(0, performance.now() - t0),
      epoch: plan.epoch,
      pair: `${plan.pair.light}→${plan.pair.heavy}`,
      expectedFid: plan.expectedFid,
      degraded: plan.degraded ?? 0,
      reason: plan.reason,
    });
  });
  const bar = new SingleBar(
    { format: `${opts.label} [{bar}] {value}/{total} done | {violations} violations | t={t}s`, hideCursor: true },
    Presets.shades_classic,
  );
  const records: ((RequestRecord & { heavyFromMs?: number }) | undefined)[] = new Array(opts.arrivals.length);
  let done = 0;
  let violations = 0;
  const inFlight = new Set<Promise<void>>();
  bar.start(opts.arrivals.length, 0, { violations: 0, t: 0 });
  // Plans in force before the first arrival count from time 0.
  plans.splice(0, plans.length, { atMs: 0, expectedFid: view.current?.expectedFid });
  if (view.current) seen.splice(0, seen.length, { atMs: 0, plan: view.current });
  const deadlineMs = Math.round(sloMs * (opts.deadlineSlos ?? 1));
  t0 = performance.now();
  let sent = 0;
  const admissions: Record<string, number> = {};
  for (let i = 0; i < opts.arrivals.length && !opts.stopped(); i++) {
    const a = opts.arrivals[i];
    const wait = a.atMs - (performance.now() - t0);
    if (wait > 1) await sleep(wait);
    if (opts.stopped()) break;
    const prompt = opts.prompts[a.promptIdx % opts.prompts.length];
    const sentAt = performance.now();
    sent++;
    const p = client
      .generate({ prompt, deadlineMs }, { timeoutMs: deadlineMs + 5_000 })
      .then(
        (reply) => {
          const latencyMs = performance.now() - sentAt;
          const score = opts.profiles.reference.scores.get(reply.servedBy)?.[referenceIndexFor(opts.profiles, prompt).index];
          // When the heavy stage began, for the artifact's per-model intake rows.
          const heavyFromMs = reply.models.light && reply.models.heavy ? Math.max(0, reply.timings.totalMs - reply.timings.heavyMs) : 0;
          records[i] = {
            arrivalMs: a.atMs,
            latencyMs,
            outcome: "served",
            route: reply.route,
            models: reply.models,
            servedModel: reply.servedBy,
            servedScore: score,
            heavyFromMs,
            ...(reply.fallback ? { fallback: reply.fallback } : {}),
          };
          if (latencyMs > sloMs) violations++;
          if (reply.admission) admissions[reply.admission.choice] = (admissions[reply.admission.choice] ?? 0) + 1;
        },
        (err) => {
          const code = asHadisError(err).code;
          // Past a deadline longer than the SLO (the artifact's 2 × SLO), no answer came at all: dropped.
          const timedOut = code === "deadline_exceeded" && deadlineMs <= sloMs;
          records[i] = { arrivalMs: a.atMs, latencyMs: null, outcome: timedOut ? "timedOut" : "dropped" };
          violations++;
        },
      )
      .finally(() => {
        done++;
        bar.update(done, { violations, t: ((performance.now() - t0) / 1000).toFixed(0) });
        inFlight.delete(p);
      });
    inFlight.add(p);
  }
  await Promise.allSettled([...inFlight]);
  bar.stop();
  view.close();
  await nc.drain().catch(() => nc.close());
  return {
    records: records.slice(0, sent).filter((r): r is RequestRecord => r !== undefined),
    plans,
    planLog,
    planSwaps,
    admissions,
    interrupted: sent < opts.arrivals.length,
    policy: first.policy,
    sloMs,
    planSloMs: first.sloMs,
    timeScale: first.timeScale,
    workers: Object.keys(first.assignment).length,
    seen,
  };
}

/** hadis-plus's admissions and the replies' fallbacks as a run's line says them ("" when none). */
function outcomesLine(admissions: Record<string, number>, records: readonly RequestRecord[]): string {
  const said = Object.entries(admissions).map(([choice, n]) => `${choice} ${n}`);
  const fallbacks = new Map<string, number>();
  for (const r of records) if (r.fallback) fallbacks.set(r.fallback, (fallbacks.get(r.fallback) ?? 0) + 1);
  const fell = [...fallbacks].map(([why, n]) => `${why} ${n}`);
  return (said.length > 0 ? `; admissions: ${said.join(", ")}` : "") + (fell.length > 0 ? `; fallbacks: ${fell.join(", ")}` : "");
}

/** The artifact controller's rows of a live replay (its scoring reads them; ignored under pooled scoring). */
function replayRows(run: ReplayResult, policy: string, profiles: ProfileSet): LedgerRow[] {
  if (run.records.length === 0) return [];
  const worst = Math.max(...tableOf(policy, profiles).map((r) => r.fid));
  const configSource = fidSourceOf(policy) === "config";
  const at = (t: number) => [...run.seen].reverse().find((s) => s.atMs <= t)?.plan ?? run.seen[0]?.plan ?? null;
  return rowsFromRecords({
    records: run.records,
    models: modelOrder(profiles).map((m) => m.name),
    lightAt: (t) => {
      const p = at(t);
      return p && p.pair.light !== p.pair.heavy ? p.pair.light : null;
    },
    marks: run.seen.map(({ atMs, plan }) => ({
      atMs,
      configFid: configSource ? (plan.degraded ? worst : (plan.expectedFid ?? worst)) : null,
    })),
    sloMs: run.sloMs,
    stopAfterMs: ARTIFACT_STOP_AFTER_TRACE_MS,
  });
}

/** Waits until every worker holds the model the plan assigns it (or `timeoutMs`). */
async function workersSettled(system: RunningSystem, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const plan = system.manager?.plans.current;
    const agents = system.workers?.agents ?? [];
    if (plan && agents.length > 0 && agents.every((a) => a.status("profile").model === (plan.assignment[a.id] ?? null))) return;
    await sleep(200);
  }
}

/** Runs `hadis bench e1`. */
export async function benchE1Command(opts: BenchE1Options): Promise<void> {
  const profiles = loadProfiles();
  const fidelity = parseFidelity(opts.fidelity, opts.mechanisms);
  const { arrivals, prompts } = loadWorkload(opts);
  const embedded = opts.embedded || !opts.nats;
  // Embedded, the SLO of our time scale; against a running system its plan's, unless --slo-ms says.
  let sloMs = embedded ? sloOf(opts, profiles.pool) : opts.sloMs;
  let planSloMs: number | undefined;
  /** A running system's own time scale and planned workers, from its first plan. */
  let runningShape: { workers: number; timeScale: number } | undefined;
  // Against a running system, one replay: whatever it runs (its plans name the policy).
  const policies = embedded ? policiesFor(opts.policy) : ["running"];
  const running = embedded ? null : natsUrls(opts.nats!);
  if (embedded) {
    const minutes = (arrivals.at(-1)?.atMs ?? 0) / 60_000;
    const each = `${arrivals.length.toLocaleString("en-US")} requests over ${minutes.toFixed(1)} min`;
    const which =
      policies.length === 1
        ? `policy ${policies[0]}`
        : `${policies.length} policies in turn, about ${Math.ceil(minutes * policies.length)} min in all`;
    process.stderr.write(
      `bench e1: a fresh embedded system per policy replays ${each} (${which}); --nats <url> replays against a running system, --policy <name> runs one\n`,
    );
  }
  let interrupted = false;
  // SIGTERM too: left to Node's default it ended the process on the spot, leaving the embedded
  // nats-server running (and its data folder behind).
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) process.exit(signal === "SIGTERM" ? 143 : 130);
    interrupted = true;
    process.stderr.write(
      `\nstopping (${signal}): no new requests; waiting for those in flight (${signal === "SIGINT" ? "Ctrl-C" : signal} again to quit now)\n`,
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const systems: SystemSummary[] = [];
  try {
    for (const policy of policies) {
      if (interrupted) break;
      let stopAll = async () => {};
      let natsUrl = running;
      let system: RunningSystem | null = null;
      if (embedded) {
        const server = await startNatsServer();
        const scoring = {
          ...(opts.scorer ? { scorer: opts.scorer } : {}),
          ...(opts.difficultyModel ? { difficultyModel: opts.difficultyModel } : {}),
        };
        system = await startSystem({
          natsUrl: server.url,
          policy,
          workers: opts.workers,
          timeScale: opts.timeScale,
          workQueue: { storage: "memory" },
          log: createLogger(policy, "warn"),
          fidelity,
          ...scoring,
        });
        natsUrl = server.url;
        stopAll = async () => {
          await system!.stop(5_000);
          await server.stop();
        };
        await workersSettled(system, 20_000);
      }
      try {
        const run = await replayTrace({
          natsUrl: natsUrl!,
          arrivals,
          prompts,
          profiles,
          sloMs,
          label: policy,
          stopped: () => interrupted,
          deadlineSlos: fidelity.on.has("drops") ? 2 : 1,
        });
        sloMs = run.sloMs;
        planSloMs = run.planSloMs;
        if (!embedded) runningShape = { workers: run.workers, timeScale: run.timeScale };
        const swaps = system?.workers ? system.workers.agents.reduce((s, a) => s + a.status("profile").swapsTotal, 0) : run.planSwaps;
        // A running system is named and scored as the policy its plans name (cascades by their plans' FID).
        const name = embedded ? policy : run.policy;
        if (!embedded && opts.policy !== "all" && opts.policy !== name)
          process.stderr.write(`note: the running system plans with ${name}, not ${opts.policy}: reported as ${name}\n`);
        const score = scoreWithFidelity({
          policy: name,
          records: run.records,
          plans: run.plans,
          sloMs: run.sloMs,
          fid: fidLookupFromProfiles(profiles),
          fidelity,
          rows: replayRows(run, name, profiles),
          profiles,
        });
        systems.push(summarize(name, score, swaps, run.planLog));
        process.stderr.write(
          `${name}: ${run.records.length} requests, ${run.planLog.length} plans${run.interrupted ? " (interrupted)" : ""}${outcomesLine(run.admissions, run.records)}\n`,
        );
      } finally {
        await stopAll();
      }
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  if (systems.length === 0) return;
  process.stdout.write(renderTable(systems) + "\n");
  // Against a running system its own workers and time scale apply (from its plan), not our options.
  const shape = embedded ? { workers: opts.workers, timeScale: opts.timeScale } : runningShape;
  const report = {
    trace: opts.trace,
    sloMs: sloMs!,
    ...(planSloMs !== undefined && planSloMs !== sloMs ? { planSloMs } : {}),
    ...shape,
    fidelity: fidelity.name,
    mechanisms: [...fidelity.on],
    mode: embedded ? "live-embedded" : `live ${opts.nats}`,
    systems,
  };
  if (opts.json) process.stdout.write(`wrote ${writeReport(opts.json, report)}\n`);
  if (opts.plots ?? systems.length > 1) {
    const name = basename(opts.trace).replace(/\.[^.]+$/, "");
    const paths = await writePlots(systems, `live-${name}`, `live, ${name}, ${shape ? `${shape.workers} workers, ` : ""}SLO ${sloMs} ms`);
    process.stdout.write(`plots: ${paths.join(", ")}\n`);
  }
}
