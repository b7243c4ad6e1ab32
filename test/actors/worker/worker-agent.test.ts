import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { GenerationBackend } from "../../../actors/worker/backend.ts";
import type { Plan } from "../../../contracts/messages.ts";
import { item, plan, settled, setup, until } from "../../helpers/worker-fakes.ts";

/** Simulated time: timers and Date.now (the agent's `now` and `sleep` ports) advance only when a test says. */
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("WorkerAgent", () => {
  it("loads its model, runs up to its batch size at once, publishes and acks each result", async () => {
    const { agent, queue, events, results } = setup();
    for (let i = 0; i < 6; i++) queue.push("a", item("a", `r${i}`));
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => results.length === 6);
    expect(events.filter((e) => e.startsWith("gen"))).toEqual(["gen a x4", "gen a x2"]);
    expect(events[0]).toBe("load a");
    expect(results.every((r) => r.ok && r.batchSize > 0)).toBe(true);
    expect(queue.acked).toHaveLength(6);
    await settled(agent.stop());
  });

  it("finishes the batch in flight before swapping, then serves the new model's queue", async () => {
    const { agent, queue, events, results } = setup(50);
    queue.push("a", item("a", "r1"));
    agent.applyPlan(plan(1, "a"));
    agent.start();
    await until(() => events.includes("gen a x1"));
    agent.applyPlan(plan(2, "b"));
    queue.push("b", item("b", "r2"));
    await until(() => results.length === 2);
    expect(events).toEqual(["load a", "gen a x1", "done a", "unload a", "load b", "gen b x1", "done b"]);
    expect(agent.status("fake").swapsTotal).toBe(1);
    // A stale epoch is ignored.
    expect(agent.applyPlan(plan(1, "a"))).toBe(false);
    await settled(agent.stop());
    expect(events.at(-1)).toBe("unload b");
  });

  it("reports the batch size of the model it serves until the swap, not the next model's", async () => {
    const { agent, queue, events } = setup(50);
    queue.push("a", item("a", "r1"));
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => events.includes("gen a x1"));
    agent.applyPlan({ ...plan(2, "b"), models: { a: { workers: 0, batchSize: 1 }, b: { workers: 1, batchSize: 8 } } });
    expect(agent.status("fake")).toMatchObject({ model: "a", batchSize: 4 }); // still running a's batch
    queue.push("b", item("b", "r2"));
    await until(() => events.includes("gen b x1"));
    expect(agent.status("fake")).toMatchObject({ model: "b", batchSize: 8 });
    await settled(agent.stop());
  });

  it("drops expired items and work for another model without running them, and counts why", async () => {
    const { agent, queue, events, results } = setup();
    queue.push("a", item("a", "old", Date.now() - 1));
    queue.push("a", item("b", "astray"));
    queue.push("a", item("a", "fresh"));
    agent.applyPlan(plan(1, "a"));
    agent.start();
    await until(() => results.length === 2);
    const [astray, fresh] = results;
    expect(astray).toMatchObject({ ok: false, requestId: "astray", model: "b", workerId: "w", error: { code: "unknown_model" } });
    expect(fresh).toMatchObject({ ok: true, requestId: "fresh" });
    expect(agent.dropped).toEqual({ expired: 1, wrongModel: 1 });
    expect(events.filter((e) => e.startsWith("gen"))).toEqual(["gen a x1"]);
    await settled(agent.stop());
  });

  it("a plan that flips back while the old model unloads loads what is wanted then; a stop then loads nothing", async () => {
    const { agent, events } = setup();
    const ports = (agent as unknown as { ports: { backend: GenerationBackend } }).ports;
    const base = { ...ports.backend };
    let unloaded!: () => void;
    ports.backend = { ...base, unload: (m) => new Promise<void>((r) => (unloaded = () => (events.push(`unload ${m}`), r()))) };
    agent.applyPlan(plan(1, "a"));
    agent.start();
    await until(() => agent.status("fake").model === "a");
    agent.applyPlan(plan(2, "b")); // unloading a…
    await until(() => agent.status("fake").state === "unloading");
    agent.applyPlan(plan(3, "a")); // …and back
    unloaded();
    await until(() => agent.status("fake").model === "a");
    expect(events).toEqual(["load a", "unload a", "load a"]); // b was never loaded
    agent.applyPlan(plan(4, "b"));
    await until(() => agent.status("fake").state === "unloading");
    const stopped = agent.stop();
    unloaded();
    await settled(stopped);
    expect(events.slice(3)).toEqual(["unload a"]);
    expect(agent.status("fake").state).toBe("draining");
  });

  it("a new plan cuts short the pause after a failed load", async () => {
    const { agent, events } = setup(20, 60_000);
    const ports = (agent as unknown as { ports: { backend: GenerationBackend } }).ports;
    const base = { ...ports.backend };
    ports.backend = { ...base, load: async (m) => (m === "a" ? Promise.reject(new Error("no a")) : base.load(m)) };
    agent.applyPlan(plan(1, "a"));
    agent.start();
    await until(() => agent.status("fake").state === "failed");
    const told = Date.now();
    agent.applyPlan(plan(2, "b"));
    await until(() => agent.status("fake").model === "b"); // not after the 60 s pause
    expect(Date.now() - told).toBeLessThan(1_000);
    expect(events).toContain("load b");
    await settled(agent.stop());
  });

  it("a plan that arrives while a load is failing is followed without the pause", async () => {
    const { agent, events } = setup(20, 60_000);
    const ports = (agent as unknown as { ports: { backend: GenerationBackend } }).ports;
    const base = { ...ports.backend };
    let loading: () => void = () => undefined;
    ports.backend = {
      ...base,
      load: (m) => (m === "a" ? new Promise<void>((_, reject) => (loading = () => reject(new Error("no a")))) : base.load(m)),
    };
    agent.applyPlan(plan(1, "a"));
    agent.start();
    await until(() => agent.status("fake").state === "loading");
    agent.applyPlan(plan(2, "b")); // while "a" is still loading
    const told = Date.now();
    loading();
    await until(() => agent.status("fake").model === "b"); // not after the 60 s pause
    expect(Date.now() - told).toBeLessThan(1_000);
    expect(events).toContain("load b");
    await settled(agent.stop());
  });

  it("a failing load leaves the worker up and reporting, and a later plan is followed", async () => {
    const { agent, events } = setup();
    const broken = { ...(agent as unknown as { ports: { backend: GenerationBackend } }).ports.backend };
    (agent as unknown as { ports: { backend: GenerationBackend } }).ports.backend = {
      ...broken,
      load: async (m) => {
        if (m === "a") throw new Error("a/unet/model.onnx: missing");
        events.push(`load ${m}`);
      },
    };
    agent.applyPlan(plan(1, "a"));
    agent.start();
    await until(() => agent.status("fake").state === "failed");
    expect(agent.status("fake").lastError).toMatch(/unet\/model\.onnx/);
    // The heartbeat names the model that would not load: the manager plans around it.
    expect(agent.status("fake").failedModel).toBe("a");
    agent.applyPlan(plan(2, "b"));
    await until(() => agent.status("fake").model === "b");
    expect(agent.status("fake").state).toBe("serving");
    expect(agent.status("fake").failedModel).toBeUndefined();
    await settled(agent.stop());
  });
});

describe("WorkerAgent under the artifact's mechanisms (from the plan in force)", () => {
  const artifactPlan = (epoch: number, mechanisms: string[]): Plan => ({ ...plan(epoch, "a", 4), mechanisms });

  it("pulls its own queue under random dispatch and, keeping it through swaps, runs every item on the model it holds", async () => {
    const { agent, queue, results } = setup(5);
    queue.push("@w", item("b", "r1"));
    queue.push("@w", item("a", "r2"));
    queue.push("a", item("a", "r3")); // the model's shared queue: not this worker's under dispatch
    agent.applyPlan(artifactPlan(1, ["dispatch", "swaps"]));
    agent.start();
    await until(() => results.length >= 2);
    await settled(agent.stop());
    expect(results.map((r) => [r.requestId, r.ok, r.ok ? r.model : null])).toEqual([
      ["r1", true, "a"],
      ["r2", true, "a"],
    ]);
    expect(queue.queues.get("a")).toHaveLength(1);
  });

  it("drops unanswered, under drops, an item whose work deadline falls before the batch would end", async () => {
    const { agent, queue, results } = setup(5);
    (agent as unknown as { ports: { backend: GenerationBackend } }).ports.backend.expectedMs = () => 100;
    const now = Date.now();
    queue.push("a", item("a", "late", now + 60));
    queue.push("a", item("a", "fits", now + 5_000));
    agent.applyPlan(artifactPlan(1, ["drops"]));
    agent.start();
    await until(() => results.length >= 1);
    await settled(agent.stop());
    expect(results.map((r) => r.requestId)).toEqual(["fits"]);
    expect(agent.dropped.expired).toBe(1);
    expect(queue.termed).toHaveLength(1);
  });
});

describe("WorkerAgent under hadis-plus's plans: batches fitted to their deadlines", () => {
  const fitting = (policy: string, maxDeliver = 0) => {
    const run = setup(100);
    // A batch of n takes 90 × n ms past the first (100 ms alone), as the profiles' batch model.
    (run.agent as unknown as { ports: { backend: GenerationBackend } }).ports.backend.expectedMs = (_m, n) => (n === 1 ? 100 : 90 * n);
    run.queue.maxDeliver = maxDeliver;
    const now = Date.now();
    run.queue.push("a", item("a", "loose", now + 5_000));
    run.queue.push("a", item("a", "tight", now + 150)); // in time alone (100 ms), late in a batch of two (180 ms)
    run.agent.applyPlan({ ...plan(1, "a", 4), policy });
    run.agent.start();
    return run;
  };

  it("runs the tight item alone, first, and hands the other back for the next batch", async () => {
    const { agent, queue, events, results } = fitting("hadis-plus");
    await until(() => results.length === 2);
    await settled(agent.stop());
    expect(events.filter((e) => e.startsWith("gen"))).toEqual(["gen a x1", "gen a x1"]);
    expect(results.map((r) => [r.requestId, r.ok])).toEqual([
      ["tight", true],
      ["loose", true],
    ]);
    expect(agent.fittedBatches).toBe(1);
    expect(queue.acked).toHaveLength(2);
    expect(queue.deliveries.get(queue.deliveries.keys().next().value!)).toBe(2); // the loose one, delivered again
  });

  it("under HADIS's plans the batch stays whole", async () => {
    const { agent, events, results } = fitting("hadis");
    await until(() => results.length === 2);
    await settled(agent.stop());
    expect(events.filter((e) => e.startsWith("gen"))).toEqual(["gen a x2"]);
    expect(agent.fittedBatches).toBe(0);
  });

  it("keeps an item on its last delivery rather than hand it back (it would be answered no_capacity)", async () => {
    const { agent, events, results } = fitting("hadis-plus", 1);
    await until(() => results.length === 2);
    await settled(agent.stop());
    expect(events.filter((e) => e.startsWith("gen"))).toEqual(["gen a x2"]);
    expect(results.every((r) => r.ok)).toBe(true);
  });
});
