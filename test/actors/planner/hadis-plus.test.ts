import { describe, expect, it } from "vitest";
import {
  backlogWaitsMs,
  chooseBolder,
  demandFell,
  hadisPlusDecision,
  hadisPlusOptions,
  plannedDemandQps,
  workersToLoad,
} from "../../../actors/planner/hadis-plus.ts";
import { modelCapacityQps, workerCapacityQps, type PlanDecision } from "../../../actors/planner/decision.ts";
import { estimateQueueDelays } from "../../../actors/control/reconcile.ts";
import { planWithMilp } from "../../../actors/planner/milp.ts";
import { QUEUE_SAFETY, type PlannerSnapshot } from "../../../actors/planner/snapshot.ts";
import { inlineSolverForFile } from "../../helpers/solver.ts";
import { settledSnapshot } from "../../helpers/planner-snapshots.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const profiles = loadProfiles();
const table = profiles.reference.paretoHybrid;
const solve = inlineSolverForFile();

const workers = [
  { id: "a", model: "sd35-medium" },
  { id: "b", model: "sd35-medium" },
  { id: "c", model: "sd35-large" },
  { id: "d", model: null },
];
const decision = (models: Record<string, number>, degraded = 0): PlanDecision => ({
  pair: { light: "sd35-medium", heavy: "sd35-large" },
  routerThreshold: 0,
  discThreshold: 0,
  heavyShare: 0,
  expectedFid: 20,
  models: Object.fromEntries(Object.entries(models).map(([m, n]) => [m, { workers: n, batchSize: 1 }])),
  reason: "",
  degraded,
});

describe("workersToLoad", () => {
  it("counts the workers a decision puts on a model beyond those holding it (an empty worker loads too)", () => {
    expect(workersToLoad(decision({ "sd35-medium": 2, "sd35-large": 2 }), workers)).toBe(1);
    expect(workersToLoad(decision({ "sd35-medium": 1, "sd35-large": 3 }), workers)).toBe(2);
    expect(workersToLoad(decision({ "sd35-large-turbo": 4 }), workers)).toBe(4);
  });
});

describe("chooseBolder", () => {
  const safe = decision({ "sd35-medium": 2, "sd35-large": 2 });
  it("takes the bold plan when it loads no more workers than the safe one", () => {
    const bold = { ...decision({ "sd35-medium": 2, "sd35-large": 2 }), expectedFid: 19 };
    expect(chooseBolder(safe, bold, workers)).toBe(bold);
  });
  it("keeps the safe plan when the bold one loads more, or either is degraded, or there is none", () => {
    expect(chooseBolder(safe, decision({ "sd35-medium": 1, "sd35-large": 3 }), workers)).toBe(safe);
    expect(chooseBolder(safe, decision({ "sd35-medium": 2, "sd35-large": 2 }, 1), workers)).toBe(safe);
    const degradedSafe = decision({ "sd35-medium": 2, "sd35-large": 2 }, 1);
    expect(chooseBolder(degradedSafe, decision({ "sd35-medium": 2, "sd35-large": 2 }), workers)).toBe(degradedSafe);
    expect(chooseBolder(safe, null, workers)).toBe(safe);
  });
  it("once demand has fallen, takes the bold plan for a lower FID whatever it loads (never a degraded one, nor a worse FID)", () => {
    const better = { ...decision({ "sd35-medium": 1, "sd35-large": 3 }), expectedFid: safe.expectedFid - 1 };
    expect(chooseBolder(safe, better, workers, true)).toBe(better);
    expect(chooseBolder(safe, better, workers, false)).toBe(safe);
    const worse = { ...decision({ "sd35-medium": 1, "sd35-large": 3 }), expectedFid: safe.expectedFid + 1 };
    expect(chooseBolder(safe, worse, workers, true)).toBe(safe);
    expect(chooseBolder(safe, { ...better, degraded: 1 }, workers, true)).toBe(safe);
  });
});

describe("demandFell", () => {
  const was = (demandQps?: number) => ({ demandQps }) as unknown as PlannerSnapshot["current"];
  it("is true once demand is a fifth or more below the plan in force's", () => {
    expect(demandFell({ demandQps: 48, current: was(60) })).toBe(true);
    expect(demandFell({ demandQps: 40, current: was(60) })).toBe(true);
    expect(demandFell({ demandQps: 49, current: was(60) })).toBe(false);
    expect(demandFell({ demandQps: 70, current: was(60) })).toBe(false);
  });
  it("is false without a plan in force, or one that does not say its demand", () => {
    expect(demandFell({ demandQps: 1, current: null })).toBe(false);
    expect(demandFell({ demandQps: 1, current: was(undefined) })).toBe(false);
  });
});

describe("plannedDemandQps", () => {
  it("takes a rise at once and a fall at half its depth; without a previous tick, the demand now", () => {
    expect(plannedDemandQps({ demandQps: 30, previousDemandQps: 20 })).toBe(30);
    expect(plannedDemandQps({ demandQps: 20, previousDemandQps: 36 })).toBe(28);
    expect(plannedDemandQps({ demandQps: 20, previousDemandQps: 20 })).toBe(20);
    expect(plannedDemandQps({ demandQps: 20 })).toBe(20);
  });
});

describe("hadisPlusDecision", () => {
  const settled = (demandQps: number, current = true) => settledSnapshot(demandQps, { policy: "hadis-plus", current });

  const bothSolves = async (s: PlannerSnapshot) => {
    const o = hadisPlusOptions(s);
    const safe = await planWithMilp(s, profiles, table, solve, o);
    const bold = await planWithMilp(s, profiles, table, solve, { ...o, swapAware: { ...o.swapAware!, coverLoading: false } });
    return { safe, bold, chosen: await hadisPlusDecision(s, profiles, table, solve) };
  };

  it("keeps the safe plan when the bold one would load more workers for its better row (8 qps: none against six)", async () => {
    const s = settled(8);
    const { safe, bold, chosen } = await bothSolves(s);
    expect(bold.expectedFid).toBeLessThan(safe.expectedFid);
    expect(workersToLoad(bold, s.workers)).toBeGreaterThan(workersToLoad(safe, s.workers));
    expect(chosen.expectedFid).toBe(safe.expectedFid);
    expect(chosen.models).toEqual(safe.models);
  });

  it("takes the bold plan when it loads fewer workers (4 qps: the safe one covers its loading workers' lost time with more of them)", async () => {
    const s = settled(4);
    const { safe, bold, chosen } = await bothSolves(s);
    expect(workersToLoad(bold, s.workers)).toBeLessThan(workersToLoad(safe, s.workers));
    expect(chosen.models).toEqual(bold.models);
  });

  it("takes the bold plan that loads more for its better row once demand has fallen a fifth below the plan in force's (8 qps, made for 12)", async () => {
    const s = settled(8);
    const fallen = { ...s, current: { ...s.current!, demandQps: 12 } };
    const { safe, bold, chosen } = await bothSolves(fallen);
    expect(workersToLoad(bold, s.workers)).toBeGreaterThan(workersToLoad(safe, s.workers));
    expect(chosen.models).toEqual(bold.models);
    expect(chosen.expectedFid).toBeLessThan(safe.expectedFid);
    // Made for 9 qps: 8 is not a fifth below it, and the safe plan stays.
    const eased = await hadisPlusDecision({ ...s, current: { ...s.current!, demandQps: 9 } }, profiles, table, solve);
    expect(eased.models).toEqual(safe.models);
  });

  it("plans a fall at half its depth until the next tick confirms it (8 qps after 20: as at 14), and at once without the rule", async () => {
    const s = settled(8);
    const fell = await hadisPlusDecision({ ...s, previousDemandQps: 20 }, profiles, table, solve);
    const halfway = await hadisPlusDecision({ ...s, demandQps: 14 }, profiles, table, solve);
    const now = await hadisPlusDecision(s, profiles, table, solve);
    expect(fell.models).toEqual(halfway.models);
    expect(fell.expectedFid).toBe(halfway.expectedFid);
    // Not vacuous: at 8 qps the plan differs, and so does the fall planned without the rule.
    expect(now.models).not.toEqual(halfway.models);
    const without = await hadisPlusDecision({ ...s, previousDemandQps: 20 }, profiles, table, solve, { slowFall: false });
    expect(without.models).toEqual(now.models);
    // A rise is planned for at once.
    const rose = await hadisPlusDecision({ ...s, demandQps: 14, previousDemandQps: 8 }, profiles, table, solve);
    expect(rose.models).toEqual(halfway.models);
  });

  it("the first plan (every worker loads either way) is the safe solve's", async () => {
    const s = settled(4, false);
    const chosen = await hadisPlusDecision(s, profiles, table, solve);
    const safe = await planWithMilp(s, profiles, table, solve, hadisPlusOptions(s));
    expect(chosen).toEqual({ ...safe, solveMs: chosen.solveMs });
  });
});

describe("hadis-plus's batch tie-break", () => {
  it("takes the shorter batch under shared queues and the larger under per-worker queues, at the same FID and workers (30 qps)", async () => {
    const shared = settledSnapshot(30, { policy: "hadis-plus" });
    const perWorker = { ...shared, perWorkerQueues: true };
    expect(hadisPlusOptions(shared).batchTieBreak).toBeUndefined();
    expect(hadisPlusOptions(perWorker).batchTieBreak).toBe("larger");
    const a = await hadisPlusDecision(shared, profiles, table, solve);
    const b = await hadisPlusDecision(perWorker, profiles, table, solve);
    expect(b.expectedFid).toBe(a.expectedFid);
    expect(Object.keys(b.models).sort()).toEqual(Object.keys(a.models).sort());
    let larger = 0;
    for (const [m, alloc] of Object.entries(a.models)) {
      expect(b.models[m].workers).toBe(alloc.workers);
      expect(b.models[m].batchSize).toBeGreaterThanOrEqual(alloc.batchSize);
      if (b.models[m].batchSize > alloc.batchSize) larger++;
    }
    expect(larger).toBeGreaterThan(0);
  });
});

describe("backlogWaitsMs", () => {
  /** The settled snapshot (sd3.5-medium → sd3.5-large, 12 and 4 workers at batch 1) with `depth` queued and the manager's waits for it. */
  const queued = (demandQps: number, depth: Record<string, number>): PlannerSnapshot => {
    const s = settledSnapshot(demandQps, { policy: "hadis-plus" });
    const plan = s.current!;
    const arrivals = { "sd35-medium": demandQps * (1 - plan.routerThreshold), "sd35-large": demandQps * plan.heavyShare };
    const waits = estimateQueueDelays(depth, arrivals, modelCapacityQps(plan, profiles), QUEUE_SAFETY);
    return { ...s, queueDepth: depth, queueDelayMs: waits };
  };
  const large = profiles.byName.get("sd35-large")!;
  const medium = profiles.byName.get("sd35-medium")!;

  it("reads a backlog on a model with a small share as its workers clear it: shorter than Little's law at its arrivals", () => {
    const s = queued(8, { "sd35-medium": 0, "sd35-large": 3 });
    const clear = (3 / (4 * workerCapacityQps(large, 1, 0.1))) * 1000 * QUEUE_SAFETY;
    expect(s.queueDelayMs["sd35-large"]).toBeGreaterThan(1.5 * clear); // the manager's, at 0.8 qps of arrivals
    expect(backlogWaitsMs(s, profiles)["sd35-large"]).toBeCloseTo(clear, 6);
  });

  it("reads a queue whose arrivals outrun its workers longer than Little's law at its arrivals", () => {
    const s = queued(52, { "sd35-medium": 10, "sd35-large": 0 });
    const clear = (10 / (12 * workerCapacityQps(medium, 1, 0.1))) * 1000 * QUEUE_SAFETY;
    expect(s.queueDelayMs["sd35-medium"]).toBeLessThan(clear / 2);
    expect(backlogWaitsMs(s, profiles)["sd35-medium"]).toBeCloseTo(clear, 6);
  });

  it("keeps the manager's wait for an empty queue, a model the plan gives no workers, and without a plan; adds none the manager did not give", () => {
    const base = settledSnapshot(52, { policy: "hadis-plus" });
    const s = {
      ...base,
      queueDepth: { "sd35-medium": 0, "sdxl-lightning": 7 },
      queueDelayMs: { "sd35-medium": 300, "sdxl-lightning": 9_000 },
    };
    expect(backlogWaitsMs(s, profiles)).toEqual({ "sd35-medium": 300, "sdxl-lightning": 9_000 });
    expect(backlogWaitsMs({ ...s, queueDepth: { "sd35-medium": 19 }, current: null }, profiles)).toEqual(s.queueDelayMs);
    // Under the artifact's controller the snapshot carries no waits: none is made up.
    expect(backlogWaitsMs({ ...base, queueDepth: { "sd35-medium": 19 }, queueDelayMs: {} }, profiles)).toEqual({});
  });

  it("keeps a better row where the manager's wait of a heavy model's backlog settles for a worse one (8 qps, three items on sd3.5-large)", async () => {
    const s = queued(8, { "sd35-medium": 0, "sd35-large": 3 });
    const kept = await hadisPlusDecision(s, profiles, table, solve);
    const fled = await hadisPlusDecision(s, profiles, table, solve, { backlogWaits: false });
    expect(kept.pair).toEqual({ light: "sd35-medium", heavy: "sd35-large" });
    expect(kept.expectedFid).toBeLessThan(fled.expectedFid);
  });
});
