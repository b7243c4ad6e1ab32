/**
 * The simulator against the live system's semantics, on hand-built cases: plans are scripted
 * (a fake control tick), so each case puts a worker or a request exactly where the live code
 * path under test decides.
 */
import { describe, expect, it } from "vitest";
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import type { TickOutcome } from "../../actors/control/reconcile.ts";
import { parseFidelity } from "../../actors/artifact/mechanisms.ts";
import { ProfileJudge } from "../../actors/judge/profile-judge.ts";
import { FixedPercentileThreshold, ReferenceFeatureScorer } from "../../actors/routing/difficulty.ts";
import { simulate, type SimConfig } from "../../actors/sim/simulator.ts";
import { createInlineHighsSolver } from "../../services/solver/highs-solver.ts";
import { loadProfiles } from "../../services/files/profiles.ts";

const profiles = loadProfiles();
const prompts = profiles.reference.prompts;
// At time scale 1: sdxl-lightning loads in 3.25 s and runs one image in 0.5 s; sd35-large-turbo
// loads in 13.7 s; sd35-medium loads in 8.3 s and runs one image in 13 s; every unload is 0.5 s.
const LIGHTNING = "sdxl-lightning";
const TURBO = "sd35-large-turbo";
const MEDIUM = "sd35-medium";
const LARGE = "sd35-large";

let epoch = 0;
/** A plan giving each worker in `assignment` its model at batch size 1. */
function plan(assignment: Record<string, string>, pair: Plan["pair"], discThreshold = 0): Plan {
  const models: Plan["models"] = {};
  for (const m of Object.values(assignment)) models[m] = { workers: (models[m]?.workers ?? 0) + 1, batchSize: 1 };
  return {
    v: PROTOCOL_VERSION,
    epoch: ++epoch,
    policy: "scripted",
    issuedAtMs: 0,
    sloMs: 120_000,
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

/** A control tick that adopts each scripted plan at the first tick at or after its time. */
function scripted(script: { atMs: number; plan: Plan }[]): SimConfig["control"] {
  let next = 0;
  return async (_state, obs) => {
    let adopted: Plan | null = null;
    while (next < script.length && script[next].atMs <= obs.nowMs) adopted = script[next++].plan;
    return { plan: adopted, snapshot: { demandQps: obs.arrivalsQps }, swapped: [] } as unknown as TickOutcome;
  };
}

/** Every prompt easy (light first), and a judge that escalates every light image. */
const easy = { score: () => 0 };
const never = { isHard: () => false };
const escalateAll = { score: async (items: readonly unknown[]) => items.map(() => 0), thresholdFor: () => 1 };

/** One request per `atMs`, on a 250 ms control tick starting at −750 ms, time scale 1. */
function config(arrivalMs: number[], workers: number, control: SimConfig["control"], over: Partial<SimConfig> = {}): SimConfig {
  return {
    policyName: "hadis",
    profiles,
    solve: () => Promise.reject(new Error("scripted plans only")),
    scorer: easy,
    threshold: never,
    judge: escalateAll,
    arrivals: arrivalMs.map((atMs, i) => ({ atMs, promptIdx: i })),
    prompts,
    workers,
    sloMs: 120_000,
    timeScale: 1,
    seed: 1,
    tickMs: 250,
    warmupMs: 1_000,
    judgeLatencyMs: 15,
    control,
    ...over,
  };
}

describe("simulate, as the live system", () => {
  it("a swap picks its target after the unload: A→B re-planned to C during the unload loads C only", async () => {
    // w-00 loads A (lightning) at −750; told B (turbo) at 3 000; told C (medium) at 3 250, while unloading A.
    const run = await simulate(
      config(
        [20_000],
        1,
        scripted([
          { atMs: -1_000, plan: plan({ "w-00": LIGHTNING }, { light: LIGHTNING, heavy: LIGHTNING }) },
          { atMs: 3_000, plan: plan({ "w-00": TURBO }, { light: TURBO, heavy: TURBO }) },
          { atMs: 3_250, plan: plan({ "w-00": MEDIUM }, { light: MEDIUM, heavy: MEDIUM }) },
        ]),
      ),
    );
    // Live (WorkerAgent.swap): unload A (0.5 s), then load what is wanted then: C, 8.3 s.
    expect(run.loads).toEqual([
      { atMs: -750 + 3_250, workerId: "w-00", model: LIGHTNING },
      { atMs: 3_000 + 500 + 8_300, workerId: "w-00", model: MEDIUM },
    ]);
    expect(run.swaps).toBe(1);
    expect(run.records[0]).toMatchObject({ outcome: "served", servedModel: MEDIUM });
  });

  it("a plan flipping back during the unload reloads the model it had, and nothing else", async () => {
    const a = plan({ "w-00": LIGHTNING }, { light: LIGHTNING, heavy: LIGHTNING });
    const run = await simulate(
      config(
        [20_000],
        1,
        scripted([
          { atMs: -1_000, plan: a },
          { atMs: 3_000, plan: plan({ "w-00": TURBO }, { light: TURBO, heavy: TURBO }) },
          { atMs: 3_250, plan: { ...a, epoch: ++epoch } },
        ]),
      ),
    );
    expect(run.loads.map((l) => [l.atMs, l.model])).toEqual([
      [2_500, LIGHTNING],
      [3_000 + 500 + 3_250, LIGHTNING],
    ]);
  });

  it("a light result that comes after the request moved to its heavy stage does not serve it", async () => {
    // The request's light item runs on w-00 (medium, 13 s, from 7 550). At 8 000 medium loses its
    // worker: the item is copied to lightning (w-01), which answers at 8 500; the judge escalates
    // and the heavy item waits for w-00 on large. w-00's light result (20 550) is for the light
    // stage: live drops it (orphaned), and the request is served by large.
    const run = await simulate(
      config(
        [7_550],
        2,
        scripted([
          { atMs: -1_000, plan: plan({ "w-00": MEDIUM, "w-01": LIGHTNING }, { light: MEDIUM, heavy: LARGE }, 0.5) },
          { atMs: 8_000, plan: plan({ "w-00": LARGE, "w-01": LIGHTNING }, { light: LIGHTNING, heavy: LARGE }, 0.5) },
        ]),
      ),
    );
    const [record] = run.records;
    expect(record).toMatchObject({
      outcome: "served",
      route: "light->heavy",
      servedModel: LARGE,
      models: { light: LIGHTNING, heavy: LARGE },
    });
    // Light 0.5 s on lightning, judge, unload medium + load large + 27 s on large, after w-00's batch.
    expect(record.latencyMs).toBe(20_550 + 500 + 13_700 + 27_000 - 7_550);
    expect(run.wastedItems).toBe(1);
  });

  it("a rejected light image is served when the heavy model's fastest generation does not fit the time left (the router's escalation check)", async () => {
    // The first prompt is hard: straight to medium (13 s), which teaches the floor 13 s. The
    // second, easy, is rejected at 500 ms + 15 ms of its 13.4 s: 12.885 s left, under 13 s.
    const first = prompts[0];
    const run = await simulate(
      config(
        [20_000, 40_000],
        2,
        scripted([{ atMs: -1_000, plan: plan({ "w-00": LIGHTNING, "w-01": MEDIUM }, { light: LIGHTNING, heavy: MEDIUM }, 0.5) }]),
        { sloMs: 13_400, scorer: { score: (p: string) => (p === first ? 1 : 0) }, threshold: { isHard: (score: number) => score > 0.5 } },
      ),
    );
    expect(run.records.map((r) => [r.outcome, r.route, r.servedModel])).toEqual([
      ["served", "heavy", MEDIUM],
      ["served", "light", LIGHTNING],
    ]);
    expect(run.escalationsSkipped).toBe(1);
    expect(run.records[1].latencyMs).toBe(500 + 15);
  });

  it("hadis-plus: a hard prompt whose heavy image is late is raced by the light model at the last moment it can answer", async () => {
    // Two hard prompts, 4 s apart, on one medium worker (13 s a generation) and one lightning
    // worker (0.5 s), SLO 20 s. The admission sees no queue on medium for either (13 s fits: the
    // first is running when the second comes); the second waits for the first, so its heavy image
    // would come 22 s after it. At 20 s − 0.5 s − 25 ms the lightning worker races it: its image
    // is served at 19.975 s, degraded. Under HADIS it times out.
    const hard = { scorer: { score: () => 1 }, threshold: { isHard: (score: number) => score > 0.5 } };
    const script = () =>
      scripted([{ atMs: -1_000, plan: plan({ "w-00": LIGHTNING, "w-01": MEDIUM }, { light: LIGHTNING, heavy: MEDIUM }, 0.5) }]);
    const plus = await simulate(config([5_000, 9_000], 2, script(), { policyName: "hadis-plus", sloMs: 20_000, ...hard }));
    expect(plus.records.map((r) => [r.outcome, r.route, r.servedModel, r.fallback])).toEqual([
      ["served", "heavy", MEDIUM, undefined],
      ["served", "light", LIGHTNING, "degraded"],
    ]);
    expect(plus.records[1].latencyMs).toBe(20_000 - 25 - 500 + 500);
    expect(plus.rescues).toBe(1);
    const hadis = await simulate(config([5_000, 9_000], 2, script(), { policyName: "hadis", sloMs: 20_000, ...hard }));
    expect(hadis.records[1].outcome).toBe("timedOut");
    expect(hadis.rescues).toBe(0);
  });

  it("hadis-plus under the artifact's drops: an escalated request whose heavy image is late gets its light image as the SLO nears; HADIS's waits", async () => {
    // One lightning worker (0.5 s) and one medium worker (13 s), SLO 20 s, two easy prompts at 10 s
    // and 11 s, both rejected. The first's heavy image ends at 23.515 s; the second's waits for it
    // (the estimate, no queue ahead, fits) and would end at 36.515 s, 25.515 s after it came: within
    // the drops' 1.5 × SLO, so HADIS serves it late. hadis-plus serves its light image at 20 s − 25 ms.
    const script = () =>
      scripted([{ atMs: -1_000, plan: plan({ "w-00": LIGHTNING, "w-01": MEDIUM }, { light: LIGHTNING, heavy: MEDIUM }, 0.5) }]);
    const drops = { sloMs: 20_000, fidelity: parseFidelity("native", "drops") };
    const plus = await simulate(config([10_000, 11_000], 2, script(), { policyName: "hadis-plus", ...drops }));
    expect(plus.records.map((r) => [r.outcome, r.route, r.servedModel, r.fallback, r.latencyMs])).toEqual([
      ["served", "light->heavy", MEDIUM, undefined, 13_515],
      ["served", "light", LIGHTNING, "degraded", 20_000 - 25],
    ]);
    const hadis = await simulate(config([10_000, 11_000], 2, script(), { policyName: "hadis", ...drops }));
    expect(hadis.records.map((r) => [r.outcome, r.route, r.latencyMs])).toEqual([
      ["served", "light->heavy", 13_515],
      ["served", "light->heavy", 25_515],
    ]);
  });

  it("tells the planner whether workers have queues of their own: under the artifact's dispatch, on the manager's tick and on the artifact's allocation", async () => {
    const assignment = { "w-00": LIGHTNING, "w-01": MEDIUM };
    const told: Record<string, boolean[]> = { native: [], dispatch: [], artifact: [] };
    const spying = (name: string): SimConfig["control"] => {
      const inner = scripted([{ atMs: -1_000, plan: plan(assignment, { light: LIGHTNING, heavy: MEDIUM }) }])!;
      return async (state, obs, tick) => (told[name].push(obs.perWorkerQueues === true), inner(state, obs, tick));
    };
    await simulate(config([1_000], 2, spying("native")));
    await simulate(config([1_000], 2, spying("dispatch"), { fidelity: parseFidelity("native", "dispatch") }));
    // The artifact's allocation calls the policy itself, every 50 trace-seconds (5 s at time scale 0.1).
    const first = plan(assignment, { light: LIGHTNING, heavy: MEDIUM });
    const planner: SimConfig["planner"] = async (snapshot) => (
      told.artifact.push(snapshot.perWorkerQueues === true),
      {
        pair: first.pair,
        routerThreshold: 0,
        discThreshold: 0,
        heavyShare: 0,
        expectedFid: 20,
        models: first.models,
        reason: "spy",
        degraded: 0,
      }
    );
    await simulate(config([1_000], 2, undefined, { fidelity: parseFidelity("native", "dispatch,tick"), timeScale: 0.1, planner }));
    expect(told.native.length).toBeGreaterThan(0);
    expect(told.native.every((t) => !t)).toBe(true);
    expect(told.dispatch.length).toBeGreaterThan(0);
    expect(told.dispatch.every((t) => t)).toBe(true);
    expect(told.artifact.length).toBeGreaterThan(0);
    expect(told.artifact.every((t) => t)).toBe(true);
  });

  it("hadis-plus: a worker runs a smaller batch when its tightest deadline fits alone and not in the full one", async () => {
    // One medium worker at batch size 2 (loaded at 7.55 s; 13 s alone, 23.4 s for two), SLO 30 s,
    // three hard prompts at 7.55 s, 8 s and 18 s. The first runs alone (to 20.55 s); then the other
    // two are queued. A batch of both would end at 43.95 s, after the second's deadline (38 s);
    // hadis-plus runs the second alone (to 33.55 s) and the third after it (to 46.55 s, before its
    // 48 s). HADIS runs the batch of two, and the second times out.
    const hard = { scorer: { score: () => 1 }, threshold: { isHard: (score: number) => score > 0.5 } };
    const script = () => {
      const batched = plan({ "w-00": MEDIUM }, { light: LIGHTNING, heavy: MEDIUM }, 0.5);
      return scripted([{ atMs: -1_000, plan: { ...batched, models: { [MEDIUM]: { workers: 1, batchSize: 2 } } } }]);
    };
    const arrivals = [7_550, 8_000, 18_000];
    const plus = await simulate(config(arrivals, 1, script(), { policyName: "hadis-plus", sloMs: 30_000, ...hard }));
    expect(plus.records.map((r) => [r.outcome, r.latencyMs])).toEqual([
      ["served", 13_000],
      ["served", 33_550 - 8_000],
      ["served", 46_550 - 18_000],
    ]);
    expect(plus.batchesFitted).toBe(1);
    const hadis = await simulate(config(arrivals, 1, script(), { policyName: "hadis", sloMs: 30_000, ...hard }));
    expect(hadis.records.map((r) => [r.outcome, r.latencyMs])).toEqual([
      ["served", 13_000],
      ["timedOut", null],
      ["served", 43_950 - 18_000],
    ]);
    expect(hadis.batchesFitted).toBe(0);
  });

  it("a running item moved by one plan is not copied again by the next", async () => {
    // The item runs on w-00 (medium) from 7 550; at 8 000 medium loses its worker and the item is
    // copied to lightning, whose worker is still loading; a second plan at 8 250 leaves it there.
    const moved = plan({ "w-00": LARGE, "w-01": LIGHTNING }, { light: LIGHTNING, heavy: LARGE });
    const run = await simulate(
      config(
        [7_550],
        2,
        scripted([
          { atMs: -1_000, plan: plan({ "w-00": MEDIUM }, { light: MEDIUM, heavy: MEDIUM }) },
          { atMs: 8_000, plan: moved },
          { atMs: 8_250, plan: { ...moved, epoch: ++epoch, discThreshold: 0 } },
        ]),
      ),
    );
    expect(run.movedItems).toBe(1);
    expect(run.records[0]).toMatchObject({ outcome: "served", servedModel: LIGHTNING, latencyMs: 8_000 + 3_250 + 500 - 7_550 });
  });

  it("a moved copy leaves its queue when the original answers first (PendingWork's onSuperseded)", async () => {
    // w-00 runs the light item on lightning from 30 000 to 30 500; at 30 250 lightning loses its
    // worker and the item is copied to turbo, which w-00 loads after its batch (ready at 44 700).
    // The original answers at 30 500 and the judge escalates it to large (w-01, 27 s an image):
    // live, the turbo copy is removed at once; here it must not run while the request is on large.
    const run = await simulate(
      config(
        [30_000],
        2,
        scripted([
          { atMs: -1_000, plan: plan({ "w-00": LIGHTNING, "w-01": LARGE }, { light: LIGHTNING, heavy: LARGE }, 0.5) },
          { atMs: 30_100, plan: plan({ "w-00": TURBO, "w-01": LARGE }, { light: TURBO, heavy: LARGE }, 0.5) },
        ]),
      ),
    );
    expect(run.movedItems).toBe(1);
    expect(run.records[0]).toMatchObject({ outcome: "served", servedModel: LARGE });
    expect(run.loads.at(-1)).toMatchObject({ model: TURBO, atMs: 30_500 + 500 + 13_700 });
    expect(run.records[0].latencyMs! + 30_000).toBeGreaterThan(30_500 + 500 + 13_700);
    expect(run.wastedItems).toBe(0);
  });

  it("demand is the rate over the time the router's reports cover: steady 20 qps reads 20 on ticks shorter than a report", async () => {
    const solver = await createInlineHighsSolver();
    const scorer = new ReferenceFeatureScorer(profiles);
    const demand: { atMs: number; qps: number }[] = [];
    const arrivals = Array.from({ length: 200 }, (_, i) => ({ atMs: i * 50, promptIdx: i }));
    // Time scale 0.02: a 500 ms tick, half the router's 1 s report; a 1 ms half-life shows each tick's sample.
    await simulate({
      policyName: "hadis",
      profiles,
      solve: (lp, o) => solver.solve(lp, o),
      scorer,
      threshold: new FixedPercentileThreshold(scorer.referenceScores),
      judge: new ProfileJudge(profiles, { latencyMs: 0, sleep: async () => undefined }),
      arrivals,
      prompts,
      workers: 4,
      sloMs: 2_000,
      timeScale: 0.02,
      seed: 1,
      demandHalfLifeMs: 1,
      onTick: (outcome, nowMs) => demand.push({ atMs: nowMs, qps: outcome.snapshot.demandQps }),
    });
    const steady = demand.filter((d) => d.atMs >= 1_000 && d.atMs <= 10_000);
    expect(steady.length).toBeGreaterThan(15);
    for (const d of steady) expect(Math.abs(d.qps - 20), `tick at ${d.atMs} ms read ${d.qps} qps`).toBeLessThanOrEqual(2);
  });
  it("the manager sees a worker's model as of its last heartbeat, as live", async () => {
    // w-00 loads lightning from −750 to 2 500; heartbeats every second at x.750 (half a beat before
    // the x.250 ticks' second), so the control tick first sees the model at 2 750.
    const firstSeen = async (heartbeatEveryMs?: number) => {
      let seenAt: number | null = null;
      const script = scripted([{ atMs: -1_000, plan: plan({ "w-00": LIGHTNING }, { light: LIGHTNING, heavy: LIGHTNING }) }])!;
      const control: SimConfig["control"] = async (state, obs, tick) => {
        if (seenAt === null && obs.workers.some((w) => w.model === LIGHTNING)) seenAt = obs.nowMs;
        return script(state, obs, tick);
      };
      await simulate(config([5_000], 1, control, heartbeatEveryMs === undefined ? {} : { heartbeatEveryMs }));
      return seenAt;
    };
    expect(await firstSeen()).toBe(2_750);
    expect(await firstSeen(0)).toBe(2_500);
  });
});
