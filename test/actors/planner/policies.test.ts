import { describe, expect, it } from "vitest";
import { PlanSchema } from "../../../contracts/messages.ts";
import { assignWorkers } from "../../../actors/planner/assignment.ts";
import { decisionToPlan } from "../../../actors/planner/decision.ts";
import { getPolicy, infaasDecision, POLICY_NAMES } from "../../../actors/planner/policies.ts";
import type { PlannerSnapshot } from "../../../actors/planner/snapshot.ts";
import { inlineSolverForFile } from "../../helpers/solver.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const profiles = loadProfiles();
const solve = inlineSolverForFile();

const snapshot = (demandQps: number, over: Partial<PlannerSnapshot> = {}): PlannerSnapshot => ({
  nowMs: 0,
  demandQps,
  queueDepth: {},
  queueDelayMs: {},
  workers: Array.from({ length: 16 }, (_, i) => ({ id: `w${i}`, model: null })),
  current: null,
  sloMs: 6000,
  timeScale: 0.1,
  ...over,
});

describe("policies", () => {
  for (const name of POLICY_NAMES) {
    for (const demand of [2, 64]) {
      it(`${name} returns a valid plan at ${demand} qps`, async () => {
        const s = snapshot(demand);
        const d = await getPolicy(name)(s, profiles, solve);
        const counts = Object.fromEntries(Object.entries(d.models).map(([m, a]) => [m, a.workers]));
        const assignment = assignWorkers(s.workers, {}, counts);
        const plan = PlanSchema.parse(
          decisionToPlan(d, { epoch: 1, policy: name, issuedAtMs: 0, sloMs: s.sloMs, timeScale: s.timeScale, assignment }),
        );
        const total = Object.values(plan.models).reduce((t, m) => t + m.workers, 0);
        expect(total).toBe(16);
        expect(Object.keys(plan.assignment)).toHaveLength(16);
        for (const m of Object.keys(plan.models)) expect(profiles.byName.has(m)).toBe(true);
        expect(plan.models[plan.pair.light]?.workers ?? 0).toBeGreaterThan(0);
        // A cascade that escalates anything has heavy workers (a single model, or no escalation, needs none).
        const escalates = plan.pair.light !== plan.pair.heavy && plan.heavyShare > 0;
        expect(escalates ? (plan.models[plan.pair.heavy]?.workers ?? 0) > 0 : true).toBe(true);
        expect(Number.isFinite(d.expectedFid)).toBe(true);
      });
    }
  }

  it("fixed-pair and diffserve stay on their pairs; clipper-heavy runs sd35-large only", async () => {
    const fixed = await getPolicy("fixed-pair")(snapshot(2), profiles, solve);
    expect(fixed.pair).toEqual({ light: "sd35-medium", heavy: "sd35-large" });
    const ds = await getPolicy("diffserve")(snapshot(4), profiles, solve);
    expect(ds.pair).toEqual({ light: "sd35-large-turbo", heavy: "sd35-large" });
    expect(ds.routerThreshold).toBe(0);
    const heavy = await getPolicy("clipper-heavy")(snapshot(64), profiles, solve);
    expect(heavy.pair).toEqual({ light: "sd35-large", heavy: "sd35-large" });
    expect(heavy.degraded).toBe(1);
  });

  it("proteus mixes models without the discriminator", async () => {
    const d = await getPolicy("proteus")(snapshot(8), profiles, solve);
    expect(d.discThreshold).toBe(0);
  });

  it("hadis is at least as good as its ablations at every demand", async () => {
    const worse: string[] = [];
    let compared = 0;
    for (const demand of [1, 8, 30, 64]) {
      const h = await getPolicy("hadis")(snapshot(demand), profiles, solve);
      for (const other of ["router-only", "disc-only", "fixed-pair"]) {
        const o = await getPolicy(other)(snapshot(demand), profiles, solve);
        // (An ablation that cannot carry the demand degrades: nothing to compare its FID with.)
        if (o.degraded !== 0) continue;
        compared++;
        if (h.expectedFid > o.expectedFid + 1e-9) worse.push(`${other} at ${demand}: hadis ${h.expectedFid} > ${o.expectedFid}`);
      }
    }
    expect(worse).toEqual([]);
    expect(compared).toBeGreaterThanOrEqual(6);
  });

  it("infaas-acc steps down under queue pressure and up when there is headroom", () => {
    const start = infaasDecision(snapshot(2), profiles);
    expect(start.pair.light).toBe("sd35-large");
    const stamp = (d: typeof start) =>
      decisionToPlan(d, { epoch: 1, policy: "infaas-acc", issuedAtMs: 0, sloMs: 6000, timeScale: 0.1, assignment: {} });
    const pressured = infaasDecision(snapshot(2, { current: stamp(start), queueDelayMs: { "sd35-large": 4000 } }), profiles);
    expect(pressured.pair.light).toBe("sd35-medium");
    const calm = infaasDecision(snapshot(2, { current: stamp(pressured) }), profiles);
    expect(calm.pair.light).toBe("sd35-large");
    const stay = infaasDecision(snapshot(8, { current: stamp(pressured) }), profiles);
    expect(stay.pair.light).toBe("sd35-medium");
  });

  it("rejects unknown policy names", () => {
    expect(() => getPolicy("nope")).toThrow(RangeError);
  });
});
