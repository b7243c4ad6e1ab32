import { beforeAll, describe, expect, it } from "vitest";
import type { Plan } from "../../../contracts/messages.ts";
import { allocationPeriodMs, artifactTick, registrationOrderAssignment } from "../../../actors/artifact/controller.ts";
import { diffserveIlp, hadisMilp, proteusIlp } from "../../../actors/artifact/milps.ts";
import { clipperDecision, infaasDecision } from "../../../actors/artifact/rules.ts";
import { parseFidelity } from "../../../actors/artifact/mechanisms.ts";
import { CLAIRVOYANT, policyFor } from "../../../actors/artifact/policies.ts";
import { getPolicy } from "../../../actors/planner/policies.ts";
import type { PlannerSnapshot } from "../../../actors/planner/snapshot.ts";
import { createInlineHighsSolver, type HighsSolver } from "../../../services/solver/highs-solver.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const profiles = loadProfiles();
const workers = Array.from({ length: 16 }, (_, i) => ({ id: `w-${String(i).padStart(2, "0")}`, model: null }));

/** A snapshot at time scale 0.1 (SLO 6 s) with `queue` queries waiting per model and no arrivals measured. */
function snapshot(demand: number, queue: Record<string, number> = {}, current: Plan | null = null): PlannerSnapshot {
  return {
    nowMs: 0,
    demandQps: demand,
    queueDepth: {},
    queueDelayMs: {},
    workers,
    current,
    sloMs: 6_000,
    timeScale: 0.1,
    signals: { demand, queueLength: queue, arrivals: {} },
  };
}

/** The plan in force with every worker on `model`, as INFaaS-Acc left it. */
const infaasPlan = (model: string): Plan => ({
  v: 1,
  epoch: 3,
  policy: "infaas-acc",
  issuedAtMs: 0,
  sloMs: 6_000,
  timeScale: 0.1,
  pair: { light: model, heavy: model },
  routerThreshold: 0,
  discThreshold: 0,
  heavyShare: 0,
  models: { [model]: { workers: 16, batchSize: 1 } },
  assignment: {},
  reason: "",
});

describe("the artifact's rule-based allocators", () => {
  it("INFaaS-Acc starts on sd3.5-large at the largest batch that fits (2) and holds it while the queue is short", () => {
    const d = infaasDecision(snapshot(10), profiles);
    expect(d.models).toEqual({ "sd35-large": { workers: 16, batchSize: 2 } });
  });

  it("INFaaS-Acc steps down when batch latency + 0.225 × queue / throughput exceeds the SLO", () => {
    // 4.86 s + 0.225 × 40 / (16 × 2 / 4.86) = 6.23 s > 6 s.
    const d = infaasDecision(snapshot(10, { "sd35-large": 40 }, infaasPlan("sd35-large")), profiles);
    expect(d.models).toEqual({ "sd35-medium": { workers: 16, batchSize: 4 } });
  });

  it("INFaaS-Acc steps up below 0.89 × SLO with no capacity check: at 1,000 in flight it still moves to the 6.6 qps sd3.5-large", () => {
    const d = infaasDecision(snapshot(1_000, { "sd35-medium": 5 }, infaasPlan("sd35-medium")), profiles);
    expect(d.models).toEqual({ "sd35-large": { workers: 16, batchSize: 2 } });
    expect(d.reason).toMatch(/step up/);
  });

  it("INFaaS-Acc jumps to the lightest variant when over 60 queries wait, and round-robins before any demand", () => {
    const jump = infaasDecision(snapshot(10, { "sd35-large": 30, "sd35-medium": 31 }, infaasPlan("sd35-large")), profiles);
    expect(jump.models).toEqual({ "sdxl-lightning": { workers: 16, batchSize: 32 } });
    const idle = infaasDecision(snapshot(0), profiles);
    expect(idle.routerMode).toBe("workers");
    expect(Object.values(idle.models).map((a) => a.workers)).toEqual([4, 4, 4, 4]);
  });

  it("Clipper runs sdxl-lightning (light) or sd3.5-large (heavy) at the largest batch whose latency fits the SLO", () => {
    expect(clipperDecision(snapshot(5), profiles, "light").models).toEqual({ "sdxl-lightning": { workers: 16, batchSize: 32 } });
    expect(clipperDecision(snapshot(5), profiles, "heavy").models).toEqual({ "sd35-large": { workers: 16, batchSize: 2 } });
    expect(clipperDecision(snapshot(5), profiles, "light").expectedFid).toBe(29.76);
  });
});

describe("the artifact's solver-based allocators (HiGHS)", () => {
  let solver: HighsSolver;
  beforeAll(async () => {
    solver = await createInlineHighsSolver();
  });
  const solve: Parameters<typeof hadisMilp>[3] = (lp, o) => solver.solve(lp, o);

  it("DiffServe takes the highest escalation share on the 0.005 grid its heavy workers carry: 14 × 0.41 qps ≥ 10 × 0.575", async () => {
    const d = await diffserveIlp(snapshot(10), profiles, solve);
    expect(d.discThreshold).toBe(0.575);
    expect(d.models["sd35-large"]).toEqual({ workers: 14, batchSize: 2 });
    expect(d.models["sd35-large-turbo"].workers).toBe(2);
  });

  it("DiffServe sends every worker light at batch 16 and escalates nothing when the light model cannot carry the demand; 9/7 at batch 8 before any", async () => {
    const shed = await diffserveIlp(snapshot(200), profiles, solve);
    expect(shed.models).toEqual({ "sd35-large-turbo": { workers: 16, batchSize: 16 } });
    expect(shed.discThreshold).toBe(0);
    const init = await diffserveIlp(snapshot(0), profiles, solve);
    expect(init.models).toEqual({ "sd35-large-turbo": { workers: 9, batchSize: 8 }, "sd35-large": { workers: 7, batchSize: 8 } });
    expect(init.discThreshold).toBe(1);
  });

  it("Proteus puts the most FID-weighted workers where total throughput covers 1.25 × demand, and shares traffic by worker", async () => {
    const low = await proteusIlp(snapshot(4), profiles, solve);
    expect(low.models).toEqual({ "sd35-large": { workers: 16, batchSize: 1 } });
    // 12.5 qps needed: 15 sd3.5-large (5.6 qps) and one sd3.5-large-turbo (7.7 qps) weigh 15 + 0.47,
    // more than 2 sd3.5-large and 14 sd3.5-medium (2 + 14 × 0.93 = 15.06) or 16 medium (14.9).
    const high = await proteusIlp(snapshot(10), profiles, solve);
    expect(high.models).toEqual({ "sd35-large": { workers: 15, batchSize: 1 }, "sd35-large-turbo": { workers: 1, batchSize: 1 } });
    expect(high.routerMode).toBe("workers");
  });

  it("HADIS sizes the light model for all of the demand: at 8 in flight sd3.5-medium takes 10 workers, leaving the heavy share 0.2", async () => {
    const five = await hadisMilp(snapshot(5), profiles, profiles.reference.paretoHybrid, solve);
    expect(five.expectedFid).toBe(19.29);
    expect([five.routerThreshold, five.discThreshold]).toEqual([0.2, 0.5]);
    expect(five.models).toEqual({ "sd35-medium": { workers: 7, batchSize: 2 }, "sd35-large": { workers: 9, batchSize: 1 } });
    const eight = await hadisMilp(snapshot(8), profiles, profiles.reference.paretoHybrid, solve);
    expect(eight.expectedFid).toBe(19.77);
    expect(eight.heavyShare).toBe(0.2);
  });

  it("HADIS sheds to every worker on sdxl-lightning at batch 1 before any demand, scored at the table's worst FID", async () => {
    const d = await hadisMilp(snapshot(0), profiles, profiles.reference.paretoHybrid, solve);
    expect(d.models).toEqual({ "sdxl-lightning": { workers: 16, batchSize: 1 } });
    expect(d.degraded).toBe(1);
    expect(d.expectedFid).toBe(29.75);
  });
});

describe("the artifact's controller step", () => {
  it("allocates every 50 trace-seconds: 5 s at time scale 0.1", () => {
    expect(allocationPeriodMs(0.1)).toBe(5_000);
    expect(allocationPeriodMs(1)).toBe(50_000);
  });

  it("hands workers out in registration order to the models in the allocator's order", () => {
    const out = registrationOrderAssignment(
      [
        { id: "w-02", model: null },
        { id: "w-00", model: "b" },
        { id: "w-01", model: null },
      ],
      { a: { workers: 2, batchSize: 1 }, b: { workers: 1, batchSize: 4 } },
    );
    expect(out).toEqual({ "w-00": "a", "w-01": "a", "w-02": "b" });
  });

  it("adopts the decision at once, and keeps the plan in force when the allocator fails", async () => {
    const base = {
      nowMs: 5_000,
      demandQps: 3,
      signals: { demand: 3, queueLength: {}, arrivals: {} },
      queueDepth: {},
      workers: workers.slice(0, 2),
      current: null,
    };
    const config = {
      policyName: "x",
      profiles,
      solve: async () => ({ status: "Error", objective: null, columns: {}, solveMs: 0 }),
      sloMs: 6_000,
      timeScale: 0.1,
    };
    const first = await artifactTick(base, { ...config, policy: async (s) => clipperDecision(s, profiles, "light") });
    expect(first.plan?.epoch).toBe(1);
    expect(first.plan?.assignment).toEqual({ "w-00": "sdxl-lightning", "w-01": "sdxl-lightning" });
    const failed = await artifactTick(
      { ...base, current: first.plan },
      { ...config, policy: async () => ({ ...first.decision, solverStatus: "Error" }) },
    );
    expect(failed.plan).toBeNull();
    // The policy is told whether workers have queues of their own (hadis-plus picks its batch by it).
    const seen: boolean[] = [];
    const spy = async (s: PlannerSnapshot) => (seen.push(s.perWorkerQueues === true), clipperDecision(s, profiles, "light"));
    await artifactTick({ ...base, perWorkerQueues: true }, { ...config, policy: spy });
    await artifactTick(base, { ...config, policy: spy });
    expect(seen).toEqual([true, false]);
    // ... and the demand the previous allocation read, which its plan carries.
    const previous: (number | undefined)[] = [];
    const spyDemand = async (s: PlannerSnapshot) => (previous.push(s.previousDemandQps), clipperDecision(s, profiles, "light"));
    await artifactTick(base, { ...config, policy: spyDemand });
    await artifactTick({ ...base, demandQps: 2, current: first.plan }, { ...config, policy: spyDemand });
    expect(first.plan?.demandQps).toBe(3);
    expect(previous).toEqual([undefined, 3]);
  });
});

describe("the clairvoyant bound's fidelity", () => {
  it("plans as hadis-plus under our design, and is refused where the artifact's demand signal is on", () => {
    expect(policyFor(CLAIRVOYANT, parseFidelity("native", ""))).toBe(getPolicy("hadis-plus"));
    expect(() => policyFor(CLAIRVOYANT, parseFidelity("artifact", ""))).toThrow(/bound of the native fidelity/);
    expect(() => policyFor(CLAIRVOYANT, parseFidelity("native", "demand"))).toThrow(RangeError);
    // The other switches leave it be: the oracle replaces arrivals, not the backlog.
    expect(policyFor(CLAIRVOYANT, parseFidelity("native", "dispatch,drops"))).toBe(getPolicy("hadis-plus"));
  });
});
