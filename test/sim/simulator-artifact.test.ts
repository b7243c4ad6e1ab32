/**
 * The artifact's mechanisms in the simulator, on hand-built cases with scripted plans: each case
 * turns on one switch and shows what it changes against our design.
 */
import { describe, expect, it } from "vitest";
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import { parseFidelity } from "../../actors/artifact/mechanisms.ts";
import type { TickObservation, TickOutcome } from "../../actors/control/reconcile.ts";
import { simulate, type SimConfig } from "../../actors/sim/simulator.ts";
import { loadProfiles } from "../../services/files/profiles.ts";

const profiles = loadProfiles();
const prompts = profiles.reference.prompts;
// At time scale 1: sdxl-lightning runs one image in 0.5 s (loads in 3.25 s); sd3.5-medium 13 s.
const LIGHTNING = "sdxl-lightning";
const MEDIUM = "sd35-medium";
const LARGE = "sd35-large";

let epoch = 0;
function plan(assignment: Record<string, string>, pair: Plan["pair"], discThreshold = 0): Plan {
  const models: Plan["models"] = {};
  for (const m of Object.values(assignment)) models[m] = { workers: (models[m]?.workers ?? 0) + 1, batchSize: 1 };
  return {
    v: PROTOCOL_VERSION,
    epoch: ++epoch,
    policy: "scripted",
    issuedAtMs: 0,
    sloMs: 10_000,
    timeScale: 1,
    pair,
    routerThreshold: 0,
    discThreshold,
    heavyShare: 0,
    models,
    assignment,
    reason: "scripted",
  };
}

/** A control tick adopting each scripted plan at its time; it remembers what it was shown. */
function scripted(script: { atMs: number; plan: Plan }[], seen: TickObservation[] = []): SimConfig["control"] {
  let next = 0;
  return async (_state, obs) => {
    seen.push(obs);
    let adopted: Plan | null = null;
    while (next < script.length && script[next].atMs <= obs.nowMs) adopted = script[next++].plan;
    return { plan: adopted, snapshot: { demandQps: obs.arrivalsQps }, swapped: [] } as unknown as TickOutcome;
  };
}

function config(arrivalMs: number[], workers: number, control: SimConfig["control"], over: Partial<SimConfig> = {}): SimConfig {
  return {
    policyName: "hadis",
    profiles,
    solve: () => Promise.reject(new Error("scripted plans only")),
    scorer: { score: () => 0 },
    threshold: { isHard: () => false },
    judge: { score: async (items: readonly unknown[]) => items.map(() => 1), thresholdFor: () => 0 },
    arrivals: arrivalMs.map((atMs, i) => ({ atMs, promptIdx: i })),
    prompts,
    workers,
    sloMs: 10_000,
    timeScale: 1,
    seed: 1,
    tickMs: 250,
    warmupMs: 1_000,
    judgeLatencyMs: 15,
    control,
    ...over,
  };
}

const twoLightning = () =>
  scripted([{ atMs: -1_000, plan: plan({ "w-00": LIGHTNING, "w-01": LIGHTNING }, { light: LIGHTNING, heavy: LIGHTNING }) }]);

describe("the artifact's mechanisms in the simulator", () => {
  it("dispatch: a query sent to a random worker can queue behind a busy one while the other idles; a shared queue never does", async () => {
    const latencies = async (mechanisms: string, seed: number) =>
      (await simulate(config([5_000, 5_100], 2, twoLightning(), { seed, fidelity: parseFidelity("native", mechanisms) }))).records.map(
        (r) => r.latencyMs,
      );
    const shared = await Promise.all(Array.from({ length: 12 }, (_, s) => latencies("", s + 1)));
    const random = await Promise.all(Array.from({ length: 12 }, (_, s) => latencies("dispatch", s + 1)));
    expect(shared.every(([a, b]) => a === 500 && b === 500)).toBe(true);
    // Behind the first (5,000 → 5,500), the second finishes at 6,000: 900 ms after it came.
    expect(random.some(([, b]) => b === 900)).toBe(true);
    expect(random.some(([, b]) => b === 500)).toBe(true);
  });

  it("drops: a late answer is served and counted late; a query that cannot finish within 1.5 × SLO is dropped at dequeue, ending unanswered at 2 × SLO", async () => {
    const medium = () => scripted([{ atMs: -1_000, plan: plan({ "w-00": MEDIUM }, { light: MEDIUM, heavy: MEDIUM }) }]);
    const artifact = await simulate(config([15_000, 15_001, 15_002], 1, medium(), { fidelity: parseFidelity("native", "drops") }));
    expect(artifact.records[0]).toMatchObject({ outcome: "served", latencyMs: 13_000 });
    // At 28,000 the second has waited 12,999 ms: + 13,000 ms runs past 15,000.
    expect(artifact.records.slice(1).map((r) => r.outcome)).toEqual(["dropped", "dropped"]);
    expect(artifact.expiredDrops).toBe(2);
    const ours = await simulate(config([15_000, 15_001, 15_002], 1, medium()));
    // Our router answers at the deadline instead.
    expect(ours.records.map((r) => r.outcome)).toEqual(["timedOut", "timedOut", "timedOut"]);
  });

  it("demand: the planner is handed 1.05 × an EWMA of the queries in flight (a count), not the arrival rate", async () => {
    const seen: TickObservation[] = [];
    const medium = scripted([{ atMs: -1_000, plan: plan({ "w-00": MEDIUM }, { light: MEDIUM, heavy: MEDIUM }) }], seen);
    // Ten queries at 15 s all wait on one 13 s worker: ten in flight for a while.
    const arrivals = Array.from({ length: 10 }, (_, i) => 15_000 + i);
    await simulate(config(arrivals, 1, medium, { fidelity: parseFidelity("native", "demand,drops") }));
    const during = seen.filter((o) => o.nowMs > 20_000 && o.nowMs < 27_000);
    expect(during.length).toBeGreaterThan(0);
    expect(during.every((o) => o.demandQps! > 5 && o.demandQps! <= 10 * 1.05)).toBe(true);
    const native: TickObservation[] = [];
    await simulate(
      config(arrivals, 1, scripted([{ atMs: -1_000, plan: plan({ "w-00": MEDIUM }, { light: MEDIUM, heavy: MEDIUM }) }], native)),
    );
    expect(native.every((o) => o.demandQps === undefined)).toBe(true);
  });

  it("swaps: a worker swaps at no cost and runs the queue it kept on its new model", async () => {
    const script = scripted([
      { atMs: -1_000, plan: plan({ "w-00": LIGHTNING }, { light: LIGHTNING, heavy: LIGHTNING }) },
      { atMs: 10_000, plan: plan({ "w-00": LARGE }, { light: LARGE, heavy: LARGE }) },
    ]);
    const run = await simulate(
      config([9_900, 9_950, 9_960], 1, script, { sloMs: 120_000, fidelity: parseFidelity("native", "dispatch,swaps") }),
    );
    // The first runs on lightning (9,900 → 10,400); the two queued behind it then run on sd3.5-large.
    expect(run.records.map((r) => r.servedModel)).toEqual([LIGHTNING, LARGE, LARGE]);
    // Loaded at the first tick (−750) and as its running batch ends (10,400): no load time either way.
    expect(run.loads.map((l) => [l.atMs, l.model])).toEqual([
      [-750, LIGHTNING],
      [10_400, LARGE],
    ]);
    expect(run.records[1].latencyMs).toBe(10_400 + 27_000 - 9_950);
  });

  it("latency: the light worker judges its own batch (10 ms) instead of a judge service one hop away", async () => {
    const cascade = () =>
      scripted([{ atMs: -1_000, plan: plan({ "w-00": LIGHTNING, "w-01": LARGE }, { light: LIGHTNING, heavy: LARGE }, 1e-6) }]);
    const onWorker = await simulate(config([9_000], 2, cascade(), { fidelity: parseFidelity("native", "latency") }));
    const service = await simulate(config([9_000], 2, cascade()));
    // Share 1e-6: the threshold is the lowest score, so the light image passes either way.
    expect(onWorker.records[0]).toMatchObject({ route: "light", latencyMs: 510 });
    expect(service.records[0]).toMatchObject({ route: "light", latencyMs: 515 });
  });
});
