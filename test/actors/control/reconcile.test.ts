import { beforeAll, describe, expect, it } from "vitest";
import { controlTick, newControlState, type TickConfig } from "../../../actors/control/reconcile.ts";
import { staticDecision, staticPolicy, heavyShareOf } from "../../../actors/control/static-policy.ts";
import { WorkerInventory } from "../../../actors/control/inventory.ts";
import { admissionLimit, refusal } from "../../../actors/routing/admission.ts";
import { getPolicy } from "../../../actors/planner/policies.ts";
import type { PlanDecision } from "../../../actors/planner/decision.ts";
import { createPolicy } from "../../../services/resource-manager/policies.ts";
import { createInlineHighsSolver, type HighsSolver } from "../../../services/solver/highs-solver.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const profiles = loadProfiles();
const workers = (n: number, model: string | null = null) =>
  Array.from({ length: n }, (_, i) => ({ id: `w${String(i).padStart(2, "0")}`, model }));

/** A decision a scripted policy returns: the pair with [workers, batch size] for each of its models. */
const scriptedDecision = (light: string, heavy: string, fid: number, [lw, lb]: [number, number], [hw, hb]: [number, number]) => ({
  pair: { light, heavy },
  routerThreshold: 0.2,
  discThreshold: 0.2,
  heavyShare: 0.36,
  expectedFid: fid,
  reason: `${light}>${heavy}`,
  degraded: 0,
  models: { [light]: { workers: lw, batchSize: lb }, [heavy]: { workers: hw, batchSize: hb } },
});

describe("controlTick", () => {
  let solver: HighsSolver;
  beforeAll(async () => {
    solver = await createInlineHighsSolver();
  });
  const config = (policyName: string): TickConfig => ({
    policyName,
    policy: getPolicy(policyName),
    profiles,
    solve: (lp, o) => solver.solve(lp, o),
    sloMs: 6_000,
    timeScale: 0.1,
    queueSafety: 1.5,
  });

  it("plans on what each worker holds under the plan in force: a worker still loading its model counts as holding it", async () => {
    const state = newControlState(1_000);
    // Epoch 1 gives 4 workers to sd3.5-large-turbo and 12 to sd3.5-medium; their heartbeats
    // still say none (all loading), and w00 still reports the model it had before.
    let seen: (string | null)[] = [];
    const scripted: TickConfig = {
      ...config("hadis"),
      policy: async (snapshot) => (
        (seen = snapshot.workers.map((w) => w.model)),
        scriptedDecision("sd35-large-turbo", "sd35-medium", 22.0, [4, 1], [12, 1])
      ),
    };
    const first = (await controlTick(state, { nowMs: 0, arrivalsQps: 2, queueDepth: {}, workers: workers(16), current: null }, scripted))
      .plan!;
    expect(seen).toEqual(Array(16).fill(null)); // nothing in force yet: the heartbeats' models
    const reported = workers(16).map((w) => (w.id === "w00" ? { ...w, model: "sdxl-lightning" } : w));
    await controlTick(state, { nowMs: 1_000, arrivalsQps: 2, queueDepth: {}, workers: reported, current: first }, scripted);
    expect(seen).toEqual(reported.map((w) => first.assignment[w.id]));
    expect(seen.filter((m) => m === "sd35-large-turbo")).toHaveLength(4);
  });

  it("tells the policy whether workers have queues of their own (the artifact's random dispatch)", async () => {
    const seen: (boolean | undefined)[] = [];
    const scripted: TickConfig = {
      ...config("hadis"),
      policy: async (snapshot) => (
        seen.push(snapshot.perWorkerQueues),
        scriptedDecision("sd35-large-turbo", "sd35-medium", 22.0, [4, 1], [12, 1])
      ),
    };
    const obs = { nowMs: 0, arrivalsQps: 2, queueDepth: {}, workers: workers(16), current: null };
    await controlTick(newControlState(1_000), { ...obs, perWorkerQueues: true }, scripted);
    await controlTick(newControlState(1_000), obs, scripted);
    expect(seen).toEqual([true, undefined]);
  });

  it("tells the policy the demand the previous tick read (none on the first)", async () => {
    const seen: (number | undefined)[] = [];
    const scripted: TickConfig = {
      ...config("hadis"),
      policy: async (snapshot) => (
        seen.push(snapshot.previousDemandQps),
        scriptedDecision("sd35-large-turbo", "sd35-medium", 22.0, [4, 1], [12, 1])
      ),
    };
    const state = newControlState(1_000);
    const obs = { arrivalsQps: 0, queueDepth: {}, workers: workers(16), current: null };
    await controlTick(state, { ...obs, nowMs: 0, demandQps: 12 }, scripted);
    await controlTick(state, { ...obs, nowMs: 1_000, demandQps: 7 }, scripted);
    await controlTick(state, { ...obs, nowMs: 2_000, demandQps: 9 }, scripted);
    expect(seen).toEqual([undefined, 12, 7]);
    // A manager resumed from a plan in force starts from the demand that plan was made for.
    const plan = (await controlTick(newControlState(1_000), { ...obs, nowMs: 0, demandQps: 15 }, scripted)).plan!;
    seen.length = 0;
    await controlTick(newControlState(1_000, plan, 3_000), { ...obs, nowMs: 3_000, demandQps: 9, current: plan }, scripted);
    expect(seen).toEqual([15]);
  });

  it("keeps workers mid-swap where the plan in force put them: the MILP moves none it need not (16 workers, 6 A / 10 B in force, 8 / 8 by heartbeat)", async () => {
    const state = newControlState(1_000);
    // The pair the MILP picks at 1 qps on 16 workers, so that it keeps it.
    const A = "sd35-medium",
      B = "sd35-large";
    const scripted: TickConfig = { ...config("hadis"), policy: async () => scriptedDecision(A, B, 22.0, [6, 1], [10, 1]) };
    const first = (await controlTick(state, { nowMs: 0, arrivalsQps: 1, queueDepth: {}, workers: workers(16), current: null }, scripted))
      .plan!;
    // Heartbeats: the workers of A per the plan, but two of B's still report A (mid-swap).
    const movingToB = Object.entries(first.assignment)
      .filter(([, m]) => m === B)
      .slice(0, 2)
      .map(([id]) => id);
    const beats = workers(16).map((w) => ({ ...w, model: movingToB.includes(w.id) ? A : first.assignment[w.id] }));
    const milp = await controlTick(
      state,
      { nowMs: 60_000, arrivalsQps: 1, queueDepth: {}, workers: beats, current: first },
      { ...config("hadis"), policy: getPolicy("hadis") },
    );
    const plan = milp.plan ?? first;
    expect(plan.pair).toEqual({ light: A, heavy: B });
    // It counts both swaps as under way: no worker of the plan in force moves to make up A's count.
    const moved = Object.keys(first.assignment).filter((id) => plan.assignment[id] !== first.assignment[id]);
    expect(moved).toEqual([]);
    expect(milp.snapshot.workers.filter((w) => w.model === A)).toHaveLength(6);
  });

  /**
   * Epoch 1 of sd3.5-large-turbo → sd3.5-medium from a scripted policy on `n` workers at `qps`,
   * then a slightly better candidate (→ sd3.5-large) that moves workers which only just loaded,
   * asked 1 s later (dwell holds it). `light` and `heavy` are [workers, batch] of each; the
   * candidate's are `held` (the same by default).
   */
  async function heldByDwell(
    n: number,
    qps: number,
    light: [number, number],
    heavy: [number, number],
    held: [[number, number], [number, number]] = [light, heavy],
  ) {
    const state = newControlState(1_000);
    let next = scriptedDecision("sd35-large-turbo", "sd35-medium", 22.0, light, heavy);
    const scripted: TickConfig = { ...config("hadis"), policy: async () => next };
    const first = (await controlTick(state, { nowMs: 0, arrivalsQps: qps, queueDepth: {}, workers: workers(n), current: null }, scripted))
      .plan!;
    next = scriptedDecision("sd35-large-turbo", "sd35-large", 21.99, ...held);
    const second = await controlTick(
      state,
      { nowMs: 1_000, arrivalsQps: qps, queueDepth: {}, workers: workers(n), current: first },
      scripted,
    );
    return { state, scripted, first, second };
  }

  it("issues epoch 1 naming every live worker, then holds when nothing changes", async () => {
    const state = newControlState(2_000);
    const first = await controlTick(
      state,
      { nowMs: 0, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: null },
      config("hadis"),
    );
    expect(first.plan?.epoch).toBe(1);
    expect(Object.keys(first.plan!.assignment)).toHaveLength(16);
    expect(first.plan!.policy).toBe("hadis");
    // The next tick counts the workers as holding epoch 1's models (they are loading them): at most
    // a batch size changes (swap costs no longer steer it: nothing moves), no worker.
    const second = await controlTick(
      state,
      { nowMs: 2_000, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: first.plan },
      config("hadis"),
    );
    // Whether or not a batch size changed (a new epoch then), the plan in force moves no worker.
    expect((second.plan ?? first.plan!).assignment).toEqual(first.plan!.assignment);
    const again = await controlTick(
      state,
      { nowMs: 4_000, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: second.plan ?? first.plan },
      config("hadis"),
    );
    expect(again.plan).toBeNull();
    expect(again.held).toBe("unchanged");
  });

  it("re-plans when demand rises (EWMA), moving workers and raising the epoch", async () => {
    const state = newControlState(1_000);
    const low = (
      await controlTick(state, { nowMs: 0, arrivalsQps: 2, queueDepth: {}, workers: workers(16), current: null }, config("hadis"))
    ).plan!;
    let current = low;
    let t = 0;
    let outcome;
    for (let i = 0; i < 20; i++) {
      t += 1_000;
      outcome = await controlTick(state, { nowMs: t, arrivalsQps: 60, queueDepth: {}, workers: workers(16), current }, config("hadis"));
      if (outcome.plan) current = outcome.plan;
    }
    expect(state.demand.value).toBeGreaterThan(55);
    expect(current.epoch).toBeGreaterThan(low.epoch);
    expect(current.expectedFid!).toBeGreaterThan(low.expectedFid!);
    const lowPair = `${low.pair.light}>${low.pair.heavy}`;
    const highPair = `${current.pair.light}>${current.pair.heavy}`;
    expect(highPair === lowPair && current.routerThreshold === low.routerThreshold).toBe(false);
  });

  it("plans without a model that would not load, replacing a plan that uses it at once, and takes it back when listed no more", async () => {
    const state = newControlState(1_000);
    const first = (
      await controlTick(state, { nowMs: 0, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: null }, config("hadis"))
    ).plan!;
    const used = first.pair.heavy;
    // One second later, the same workers: damping alone would hold any new configuration this soon after the swaps.
    const out = await controlTick(
      state,
      { nowMs: 1_000, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: first, unavailableModels: [used] },
      config("hadis"),
    );
    expect(out.plan).not.toBeNull();
    expect([out.plan!.pair.light, out.plan!.pair.heavy]).not.toContain(used);
    expect(out.plan!.models[used]?.workers ?? 0).toBe(0);
    expect(Object.values(out.plan!.assignment)).not.toContain(used);
    expect(Object.keys(out.plan!.assignment)).toHaveLength(16);
    expect(out.plan!.reason).toContain(`without ${used} (failing on workers)`);
    const held = await controlTick(
      state,
      { nowMs: 2_000, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: out.plan, unavailableModels: [used] },
      config("hadis"),
    );
    expect(held.plan).toBeNull();
    // Listed no more (its window passed): the planner may choose it again.
    let current = out.plan!;
    for (let t = 60_000; t < 200_000; t += 5_000) {
      const o = await controlTick(state, { nowMs: t, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current }, config("hadis"));
      if (o.plan) current = o.plan;
    }
    expect([current.pair.light, current.pair.heavy]).toContain(used);
  });

  it("plans no batch above what a model's workers found runs", async () => {
    // Demand far past capacity: the degraded plan, all workers on the lightest model, batched.
    const state = newControlState(1_000);
    let current = (
      await controlTick(state, { nowMs: 0, arrivalsQps: 300, queueDepth: {}, workers: workers(16), current: null }, config("hadis"))
    ).plan!;
    for (let t = 1_000; t <= 20_000; t += 1_000) {
      const o = await controlTick(state, { nowMs: t, arrivalsQps: 300, queueDepth: {}, workers: workers(16), current }, config("hadis"));
      if (o.plan) current = o.plan;
    }
    const [model] = Object.entries(current.models).find(([, a]) => a.workers > 0 && a.batchSize > 1)!;
    const out = await controlTick(
      state,
      { nowMs: 20_500, arrivalsQps: 300, queueDepth: {}, workers: workers(16), current, batchCaps: new Map([[model, 1]]) },
      config("hadis"),
    );
    expect(out.plan).not.toBeNull(); // (a new batch size moves no worker: damping lets it through)
    expect(out.plan!.models[model].workers).toBeGreaterThan(0);
    expect(out.plan!.models[model].batchSize).toBe(1);
    expect(out.plan!.reason).toContain(`batches ${model} ≤ 1 (workers' caps)`);
    // A plan that is kept (here: the solver fails) is kept within the caps too, on the same workers.
    const broken: TickConfig = {
      ...config("hadis"),
      solve: async () => ({ status: "Error", objective: null, columns: {}, solveMs: 1, error: "worker thread gone" }),
    };
    const kept = await controlTick(
      state,
      { nowMs: 21_000, arrivalsQps: 300, queueDepth: {}, workers: workers(16), current, batchCaps: new Map([[model, 1]]) },
      broken,
    );
    expect(kept.plan).not.toBeNull();
    expect(kept.plan!.models[model].batchSize).toBe(1);
    expect(kept.plan!.assignment).toEqual(current.assignment);
    expect(kept.plan!.reason).toMatch(/^solver Error: configuration of epoch \d+ .*batches .* ≤ 1 \(workers' caps\)/);
  });

  it("a policy whose models its configuration names keeps them when one fails to load: static keeps its split, fixed-pair still plans", async () => {
    for (const name of ["static", "fixed-pair"]) {
      const fixed: TickConfig = { ...config("hadis"), policyName: name, policy: createPolicy(name, profiles), fixedModels: true };
      const state = newControlState(1_000);
      const first = (await controlTick(state, { nowMs: 0, arrivalsQps: 4, queueDepth: {}, workers: workers(8), current: null }, fixed))
        .plan!;
      const used = first.pair.heavy;
      const after = await controlTick(
        state,
        { nowMs: 1_000, arrivalsQps: 4, queueDepth: {}, workers: workers(8), current: first, unavailableModels: [used] },
        fixed,
      );
      expect(after.plan, name).toBeNull();
      expect(after.held, name).toBe("unchanged");
    }
  });

  it("a failing solver keeps the configuration in force, yet a dead worker leaves the plan at once", async () => {
    const state = newControlState(1_000);
    // (At a demand the plan still covers without one worker: one it does not is replaced, below.)
    const plan = (
      await controlTick(state, { nowMs: 0, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: null }, config("hadis"))
    ).plan!;
    const broken: TickConfig = {
      ...config("hadis"),
      solve: async () => ({ status: "Error", objective: null, columns: {}, solveMs: 1, error: "worker thread gone" }),
    };
    const same = await controlTick(state, { nowMs: 1_000, arrivalsQps: 4, queueDepth: {}, workers: workers(16), current: plan }, broken);
    expect(same.plan).toBeNull();
    expect(same.held).toMatch(/solver Error: keeping epoch/);
    const dead = await controlTick(state, { nowMs: 2_000, arrivalsQps: 4, queueDepth: {}, workers: workers(15), current: plan }, broken);
    expect(dead.plan).not.toBeNull();
    expect(Object.keys(dead.plan!.assignment)).not.toContain("w15");
    expect([dead.plan!.pair, dead.plan!.routerThreshold, dead.plan!.discThreshold]).toEqual([
      plan.pair,
      plan.routerThreshold,
      plan.discThreshold,
    ]);
    // The dead worker's model counts one fewer (capacity and admission read these counts).
    const lost = plan.assignment.w15;
    expect(dead.plan!.models[lost].workers).toBe(plan.models[lost].workers - 1);
    // A worker that joins as one dies takes its place.
    const replaced = await controlTick(
      state,
      { nowMs: 3_000, arrivalsQps: 4, queueDepth: {}, workers: [...workers(15), { id: "w-new", model: null }], current: plan },
      broken,
    );
    expect(replaced.plan!.assignment["w-new"]).toBe(lost);
    expect(replaced.plan!.models[lost].workers).toBe(plan.models[lost].workers);
  });

  it("a worker dying while damping holds a new configuration re-homes its share in the configuration in force, not the held one", async () => {
    // A slightly better configuration that moves workers which only just loaded: held by dwell.
    const { state, scripted, first, second: held } = await heldByDwell(8, 1, [4, 1], [4, 1]);
    expect(held.plan).toBeNull();
    expect(held.held).toMatch(/held/);
    // w07 dies meanwhile: its share moves now, within the configuration in force.
    const dead = await controlTick(state, { nowMs: 2_000, arrivalsQps: 1, queueDepth: {}, workers: workers(7), current: first }, scripted);
    expect(dead.verdict?.adopt).toBe(false);
    expect(dead.plan!.pair).toEqual(first.pair);
    expect(Object.keys(dead.plan!.assignment)).toHaveLength(7);
    expect(Object.values(dead.plan!.assignment)).not.toContain("sd35-large");
    expect(dead.plan!.epoch).toBe(first.epoch + 1);
  });

  it("…but when the dead worker was its model's last, the policy's configuration is adopted (no model of the pair left unserved)", async () => {
    const { state, scripted, first, second } = await heldByDwell(
      3,
      1,
      [2, 1],
      [1, 1],
      [
        [1, 1],
        [2, 1],
      ],
    );
    expect(second.plan).toBeNull();
    const mediumWorker = Object.entries(first.assignment).find(([, m]) => m === "sd35-medium")![0];
    const alive = workers(3).filter((w) => w.id !== mediumWorker);
    const after = (await controlTick(state, { nowMs: 2_000, arrivalsQps: 1, queueDepth: {}, workers: alive, current: first }, scripted))
      .plan!;
    expect(after.pair).toEqual({ light: "sd35-large-turbo", heavy: "sd35-large" });
    for (const m of [after.pair.light, after.pair.heavy]) expect(after.models[m].workers).toBeGreaterThanOrEqual(1);
  });

  it("judges the plan in force as it runs on the workers alive: one that falls short without a dead worker is replaced, not re-issued short", async () => {
    // sd3.5-medium at 4 workers carries 3.08 qps; at 8 qps the heavy share 0.36 asks 2.88 of it.
    const { state, scripted, first, second } = await heldByDwell(8, 8, [4, 1], [4, 1]);
    expect(second.plan).toBeNull();
    // A medium worker dies inside the dwell: 3 left carry 2.31 qps, short of 2.88.
    const mediumWorker = Object.entries(first.assignment).find(([, m]) => m === "sd35-medium")![0];
    const out = await controlTick(
      state,
      { nowMs: 2_000, arrivalsQps: 8, queueDepth: {}, workers: workers(8).filter((w) => w.id !== mediumWorker), current: first },
      scripted,
    );
    expect(out.verdict?.adopt).toBe(true);
    expect(out.verdict?.reason).toMatch(/sd35-medium capacity 2\.3 qps < load 2\.9 qps/);
    expect(out.plan!.pair).toEqual({ light: "sd35-large-turbo", heavy: "sd35-large" });
  });

  it("a failing solver does not keep a plan whose pair has lost a model's last worker: the degraded decision goes on", async () => {
    const state = newControlState(1_000);
    let next: PlanDecision = { ...scriptedDecision("sd35-large-turbo", "sd35-medium", 22.0, [2, 1], [1, 1]) };
    const scripted: TickConfig = { ...config("hadis"), policy: async () => next };
    const first = (await controlTick(state, { nowMs: 0, arrivalsQps: 0, queueDepth: {}, workers: workers(3), current: null }, scripted))
      .plan!;
    const mediumWorker = Object.entries(first.assignment).find(([, m]) => m === "sd35-medium")![0];
    // The solver fails as the heavy model's only worker dies: its degraded answer, every worker on one model.
    next = {
      pair: { light: "sd35-large-turbo", heavy: "sd35-large-turbo" },
      routerThreshold: 0,
      discThreshold: 0,
      heavyShare: 0,
      expectedFid: 23.5,
      reason: "degraded",
      degraded: 1,
      solverStatus: "Error",
      models: { "sd35-large-turbo": { workers: 2, batchSize: 1 } },
    };
    const out = await controlTick(
      state,
      { nowMs: 1_000, arrivalsQps: 0, queueDepth: {}, workers: workers(3).filter((w) => w.id !== mediumWorker), current: first },
      scripted,
    );
    expect(out.plan).not.toBeNull();
    for (const m of [out.plan!.pair.light, out.plan!.pair.heavy]) expect(out.plan!.models[m]?.workers ?? 0).toBeGreaterThanOrEqual(1);
  });

  it("a plan damping keeps in force is re-issued within a batch cap reported meanwhile, on the same workers", async () => {
    // A slightly better configuration that moves workers which only just loaded: held by dwell...
    const { state, scripted, first, second: quiet } = await heldByDwell(8, 1, [4, 4], [4, 2]);
    expect(first.models["sd35-large-turbo"].batchSize).toBe(4);
    expect(quiet.plan).toBeNull();
    // ...and still held when the light model's workers find batches above 2 fail: the plan in
    // force goes out again at batch 2, nobody moved, the held configuration not adopted.
    const out = await controlTick(
      state,
      { nowMs: 2_000, arrivalsQps: 1, queueDepth: {}, workers: workers(8), current: first, batchCaps: new Map([["sd35-large-turbo", 2]]) },
      scripted,
    );
    expect(out.verdict?.adopt).toBe(false);
    expect(out.plan).not.toBeNull();
    expect(out.plan!.epoch).toBe(first.epoch + 1);
    expect(out.plan!.pair).toEqual(first.pair);
    expect(out.plan!.assignment).toEqual(first.assignment);
    expect(out.plan!.models["sd35-large-turbo"].batchSize).toBe(2);
    expect(out.plan!.models["sd35-medium"].batchSize).toBe(2);
    expect(out.swapped).toEqual([]);
    expect(out.plan!.reason).toContain("batches sd35-large-turbo ≤ 2 (workers' caps)");
    // Within the caps now: the next tick holds again.
    const after = await controlTick(
      state,
      {
        nowMs: 3_000,
        arrivalsQps: 1,
        queueDepth: {},
        workers: workers(8),
        current: out.plan,
        batchCaps: new Map([["sd35-large-turbo", 2]]),
      },
      scripted,
    );
    expect(after.plan).toBeNull();
  });

  it("a failing solver does not keep a plan that no longer covers the demand", async () => {
    const state = newControlState(1_000);
    const plan = (
      await controlTick(state, { nowMs: 0, arrivalsQps: 2, queueDepth: {}, workers: workers(16), current: null }, config("hadis"))
    ).plan!;
    const broken: TickConfig = {
      ...config("hadis"),
      solve: async () => ({ status: "Error", objective: null, columns: {}, solveMs: 1, error: "worker thread gone" }),
    };
    let current = plan;
    let out;
    for (let t = 1_000; t <= 30_000; t += 1_000) {
      out = await controlTick(state, { nowMs: t, arrivalsQps: 60, queueDepth: {}, workers: workers(16), current }, broken);
      if (out.plan) current = out.plan;
    }
    expect(current.epoch).toBeGreaterThan(plan.epoch);
    expect(current.degraded).toBe(1); // every worker on the lightest model: the most it can serve
    expect(Object.values(current.models).reduce((t, m) => t + m.workers, 0)).toBe(16);
  });

  it("starts the dwell of a worker that joins, so the next tick does not move it while it loads", async () => {
    const state = newControlState(1_000);
    const plan = (
      await controlTick(state, { nowMs: 0, arrivalsQps: 4, queueDepth: {}, workers: workers(15), current: null }, config("hadis"))
    ).plan!;
    const joined = await controlTick(
      state,
      { nowMs: 5_000, arrivalsQps: 4, queueDepth: {}, workers: [...workers(15), { id: "w-new", model: null }], current: plan },
      config("hadis"),
    );
    expect(joined.plan!.assignment["w-new"]).toBeDefined();
    expect(state.lastSwapAtMs["w-new"]).toBe(5_000);
  });

  it("reflects a dead worker at once", async () => {
    const state = newControlState(1_000);
    const plan = (
      await controlTick(state, { nowMs: 0, arrivalsQps: 10, queueDepth: {}, workers: workers(16), current: null }, config("hadis"))
    ).plan!;
    const next = await controlTick(
      state,
      { nowMs: 1_000, arrivalsQps: 10, queueDepth: {}, workers: workers(15), current: plan },
      config("hadis"),
    );
    expect(next.plan).not.toBeNull();
    expect(Object.keys(next.plan!.assignment)).not.toContain("w15");
    expect(next.plan!.epoch).toBe(plan.epoch + 1);
    // Its dwell is forgotten with it (worker ids are fresh with every worker process: kept, they piled up).
    expect(Object.keys(state.lastSwapAtMs)).toHaveLength(15);
    expect(state.lastSwapAtMs).not.toHaveProperty("w15");
  });

  it("stamps random routing on Proteus plans", async () => {
    const out = await controlTick(
      newControlState(1_000),
      { nowMs: 0, arrivalsQps: 30, queueDepth: {}, workers: workers(16), current: null },
      config("proteus"),
    );
    expect(out.plan!.routerMode).toBe("random");
    expect(out.plan!.discThreshold).toBe(0);
  });
});

describe("staticDecision", () => {
  const latency = (m: string) => ({ a: 100, b: 1000 })[m as "a" | "b"];
  it("splits workers by the GPU time each model needs", () => {
    const d = staticDecision(
      { light: "a", heavy: "b", routerThreshold: 0.2, discThreshold: 0.2, lightBatchSize: 1, heavyBatchSize: 1 },
      latency,
      10,
    );
    // light 0.8 × 100 = 80, heavy 0.36 × 1000 = 360 → light ≈ 10 × 80/440 = 1.8 → 2
    expect(d.models).toEqual({ a: { workers: 2, batchSize: 1 }, b: { workers: 8, batchSize: 1 } });
    expect(d.heavyShare).toBeCloseTo(heavyShareOf(0.2, 0.2));
    expect(heavyShareOf(0.2, 0.2)).toBeCloseTo(0.36);
  });

  it("with one worker, serves and routes everything on the heavy model (no traffic to a light model nobody serves)", () => {
    const d = staticDecision(
      { light: "a", heavy: "b", routerThreshold: 0.2, discThreshold: 0.2, lightBatchSize: 1, heavyBatchSize: 1, expectedFid: 20 },
      latency,
      1,
    );
    expect(d.models).toEqual({ b: { workers: 1, batchSize: 1 } });
    expect(d.pair).toEqual({ light: "b", heavy: "b" });
    expect([d.routerThreshold, d.discThreshold, d.heavyShare]).toEqual([0, 0, 1]);
    expect(d.expectedFid).toBeNaN();
  });

  it("as a policy, uses the live worker count", async () => {
    const d = await staticPolicy({
      light: "sd35-large-turbo",
      heavy: "sd35-medium",
      routerThreshold: 0.2,
      discThreshold: 0.2,
      lightBatchSize: 2,
      heavyBatchSize: 1,
    })(
      { nowMs: 0, demandQps: 0, queueDepth: {}, queueDelayMs: {}, workers: workers(4), current: null, sloMs: 6000, timeScale: 0.1 },
      profiles,
      async () => ({ status: "Error", objective: null, columns: {}, solveMs: 0 }),
    );
    expect(Object.values(d.models).reduce((s, m) => s + m.workers, 0)).toBe(4);
  });
});

describe("WorkerInventory", () => {
  const beat = (id: string, state: "serving" | "draining" = "serving") => ({
    v: 1 as const,
    workerId: id,
    backend: "profile",
    model: "a",
    state,
    batchSize: 1,
    inFlight: 0,
    servedTotal: 0,
    swapsTotal: 0,
    planEpoch: 1,
    sentAtMs: 0,
  });
  it("forgets workers silent too long and those that say they leave", () => {
    const inv = new WorkerInventory();
    inv.observe(beat("w1"), 0);
    inv.observe(beat("w2"), 900);
    expect(inv.live(1000, 500).map((w) => w.id)).toEqual(["w2"]);
    inv.observe(beat("w2", "draining"), 1000);
    expect(inv.live(1000, 500)).toEqual([]);
  });
});

describe("resuming and admission", () => {
  it("a restarted manager resumes demand and dwell from the plan in force: no flap", async () => {
    const solver = await createInlineHighsSolver();
    const config: TickConfig = {
      policyName: "hadis",
      policy: getPolicy("hadis"),
      profiles,
      solve: (lp, o) => solver.solve(lp, o),
      sloMs: 6_000,
      timeScale: 0.1,
      queueSafety: 1.5,
    };
    const first = newControlState(2_000);
    let plan = (await controlTick(first, { nowMs: 0, arrivalsQps: 40, queueDepth: {}, workers: workers(16), current: null }, config)).plan!;
    for (let t = 1_000; t <= 10_000; t += 1_000) {
      const out = await controlTick(first, { nowMs: t, arrivalsQps: 40, queueDepth: {}, workers: workers(16), current: plan }, config);
      if (out.plan) plan = out.plan;
    }
    expect(plan.demandQps).toBeGreaterThan(30);
    // The manager restarts: a new state from the plan in KV; its first tick sees a short, quiet window.
    const resumed = newControlState(2_000, plan, 10_500);
    expect(resumed.demand.value).toBeCloseTo(plan.demandQps!, 1);
    const next = await controlTick(resumed, { nowMs: 10_600, arrivalsQps: 0, queueDepth: {}, workers: workers(16), current: plan }, config);
    expect(next.plan === null || JSON.stringify(next.plan.assignment) === JSON.stringify(plan.assignment)).toBe(true);
    await solver.close();
  });

  it("sets capacity from the tightest model and admission from capacity × deadline", async () => {
    const solver = await createInlineHighsSolver();
    const config: TickConfig = {
      policyName: "clipper-light",
      policy: getPolicy("clipper-light"),
      profiles,
      solve: (lp, o) => solver.solve(lp, o),
      sloMs: 6_000,
      timeScale: 0.1,
      queueSafety: 1.5,
      admissionHeadroom: 1.5,
    };
    const plan = (
      await controlTick(
        newControlState(1_000),
        { nowMs: 0, arrivalsQps: 10, queueDepth: {}, workers: workers(16), current: null, routers: 2 },
        config,
      )
    ).plan!;
    const model = profiles.byName.get(plan.pair.light)!;
    const batch = plan.models[plan.pair.light].batchSize;
    const perWorker = (batch * 1000) / (model.latencyMsByBatch[String(batch)] * 0.1);
    expect(plan.capacityQps).toBeCloseTo(16 * perWorker, 0);
    expect(plan.admission).toEqual({ routers: 2, headroom: 1.5 });
    // Admission is bounded only on the degraded plan; then a router holds about its share of capacity × deadline.
    expect(admissionLimit(plan, 6_000)).toBe(Infinity);
    const degraded = { ...plan, degraded: 1 };
    expect(admissionLimit(degraded, 6_000)).toBe(Math.floor((plan.capacityQps! / 2) * 6 * 1.5));
    expect(refusal(degraded, admissionLimit(degraded, 6_000), 6_000)).toBeNull();
    const refused = refusal(degraded, admissionLimit(degraded, 6_000) + 1, 6_000)!;
    expect(refused.code).toBe("overloaded");
    expect(refused.details.retryAfterMs).toBe(3_000);
    expect(admissionLimit({ ...degraded, capacityQps: 0 }, 6_000)).toBe(Infinity);
    await solver.close();
  });
});
