import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkSource } from "../../../actors/worker/worker-agent.ts";
import type { GenerationBackend } from "../../../actors/worker/backend.ts";
import { failWhen, item, plan, settled, setup, until } from "../../helpers/worker-fakes.ts";

/** Simulated time: timers and Date.now (the agent's `now` and `sleep` ports) advance only when a test says. */
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("WorkerAgent with failing batches", () => {
  it("a failed batch hands back items on their first delivery and answers the rest with generation_failed, then pauses", async () => {
    const { agent, queue, results } = setup(1);
    const ports = (agent as unknown as { ports: { backend: GenerationBackend } }).ports;
    const base = { ...ports.backend };
    let failures = 3; // the batch, then each of its halves: not one item's fault
    ports.backend = {
      ...base,
      generate: async (m, batch) => {
        if (failures-- > 0) throw new Error("inference thread exited (code 1)");
        return base.generate(m, batch);
      },
    };
    const seen = queue.deliveries;
    const retried = item("a", "fresh");
    const again = item("a", "second-try");
    seen.set(again, 1); // delivered once before: this is its second try
    queue.push("a", retried);
    queue.push("a", again);
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => agent.status("fake").state === "failed");
    expect(agent.status("fake").lastError).toMatch(/thread exited/);
    expect(results.map((r) => [r.requestId, r.ok])).toEqual([["second-try", false]]);
    expect(results[0].ok === false && results[0].error.code).toBe("generation_failed");
    // The handed-back item runs after the pause, and answers once.
    await until(() => results.length === 2);
    expect(results[1]).toMatchObject({ requestId: "fresh", ok: true });
    expect(seen.get(retried)).toBe(2);
    expect(queue.acked).toHaveLength(2);
    expect(agent.failedBatches).toBe(1);
    await until(() => agent.status("fake").state === "serving");
    expect(agent.status("fake").lastError).toBeUndefined();
    await settled(agent.stop());
  });

  it("reports its loaded model as failing after three failed batches in a row on two prompts, not for one bad prompt, until a batch runs", async () => {
    const { agent, queue, results } = setup(1);
    const ports = (agent as unknown as { ports: { backend: GenerationBackend } }).ports;
    const base = { ...ports.backend };
    let broken = true;
    ports.backend = {
      ...base,
      generate: async (m, batch) => {
        if (broken) throw new Error('output "sample" has 4 channels, expected 3');
        return base.generate(m, batch);
      },
    };
    const failed = () => agent.failedBatches;
    agent.applyPlan(plan(1, "a", 1));
    agent.start();
    await until(() => agent.status("fake").state === "serving");
    // One item failing twice (its two tries) says nothing about the model; nor does a caller
    // retrying that prompt (a new request, the same prompt).
    queue.push("a", item("a", "p1", undefined, "a bad prompt"));
    await until(() => failed() === 2);
    expect(agent.status("fake").failedModel).toBeUndefined();
    queue.push("a", item("a", "p1-retry", undefined, "a bad prompt"));
    await until(() => failed() === 4);
    expect(agent.status("fake").failedModel).toBeUndefined();
    await until(() => agent.status("fake").state === "serving");
    expect(agent.status("fake").failedModel).toBeUndefined();
    // Another prompt fails too: the loaded model is failing, and the worker says so between pulls too.
    queue.push("a", item("a", "p2", undefined, "a lighthouse"));
    await until(() => failed() === 5);
    expect(agent.status("fake")).toMatchObject({ state: "failed", model: "a", failedModel: "a" });
    await until(() => failed() === 6); // p2's second try
    await vi.advanceTimersByTimeAsync(40); // past the pause: pulling again, still saying so
    expect(agent.status("fake")).toMatchObject({ state: "failed", failedModel: "a" });
    expect(results.map((r) => [r.requestId, r.ok])).toEqual([
      ["p1", false],
      ["p1-retry", false],
      ["p2", false],
    ]);
    // The fault passes: the next batch runs, and the worker serves again.
    broken = false;
    queue.push("a", item("a", "p3"));
    await until(() => results.length === 4);
    expect(results[3]).toMatchObject({ requestId: "p3", ok: true });
    await until(() => agent.status("fake").state === "serving");
    expect(agent.status("fake").failedModel).toBeUndefined();
    // A new load starts the count afresh.
    broken = true;
    queue.push("a", item("a", "p5", undefined, "a fox"));
    await until(() => failed() === 8);
    agent.applyPlan(plan(2, "b", 1));
    await until(() => agent.status("fake").model === "b");
    agent.applyPlan(plan(3, "a", 1));
    queue.push("a", item("a", "p4", undefined, "a barn"));
    await until(() => failed() === 9);
    expect(agent.status("fake").failedModel).toBeUndefined();
    // Failing, then stopped: a draining worker names no failed model.
    queue.push("a", item("a", "p6", undefined, "an owl"));
    await until(() => agent.status("fake").failedModel === "a");
    const stopped = agent.stop();
    expect(agent.status("fake")).toMatchObject({ state: "draining" });
    expect(agent.status("fake").failedModel).toBeUndefined();
    await settled(stopped);
  });

  it("a bad item batched with good ones fails alone: the others are served, and the model is not reported", async () => {
    // (Reported after one batch failed in every item, on two prompts: its batch-mates' prompts must not count.)
    const { agent, queue, results } = setup(1, 10, 1);
    const sizes = failWhen(agent, (_m, batch) => (batch.some((b) => b.prompt === "poison") ? "NaN in the latents" : null));
    ["a cat", "a dog", "poison", "a fox"].forEach((prompt, i) => queue.push("a", item("a", `i${i}`, undefined, prompt)));
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => results.length === 4);
    expect(results.slice(0, 3).map((r) => [r.requestId, r.ok])).toEqual([
      ["i0", true],
      ["i1", true],
      ["i3", true],
    ]);
    // 4 fails; 2 (with the bad one) fails, 2 runs; 1 (bad) fails, 1 runs.
    expect(sizes.slice(0, 5)).toEqual([4, 2, 2, 1, 1]);
    // Handed back on its first delivery, it fails again alone, and is answered generation_failed.
    expect(results[3]).toMatchObject({ requestId: "i2", ok: false, error: { code: "generation_failed" } });
    expect(sizes.slice(5)).toEqual([1]);
    expect(agent.status("fake").failedModel).toBeUndefined();
    await settled(agent.stop());
  });

  it("a batch too big for the backend runs in parts that fit; the worker then takes that size, and tries twice it after 16 batches", async () => {
    const { agent, queue, results } = setup(1, 10, 1);
    const sizes = failWhen(agent, (_m, batch) => (batch.length > 3 ? "CUDA out of memory" : null));
    for (let i = 0; i < 8; i++) queue.push("a", item("a", `j${i}`, undefined, `prompt ${i}`));
    agent.applyPlan(plan(1, "a", 8));
    agent.start();
    await until(() => results.length === 8);
    // 8 fails, each 4 fails, each 2 runs: every item served on its first try, each part's result as its own batch.
    expect(sizes).toEqual([8, 4, 2, 2, 4, 2, 2]);
    expect(results.every((r) => r.ok && r.batchSize === 2)).toBe(true);
    expect(agent.failedBatches).toBe(0);
    expect(agent.status("fake").failedModel).toBeUndefined();
    // Then 2 at a time (it says so), until 16 batches of 2 ran: then 4 is tried again.
    for (let i = 8; i < 8 + 32 + 4; i++) queue.push("a", item("a", `j${i}`, undefined, `prompt ${i}`));
    await until(() => results.length === 8 + 32 + 4);
    expect(sizes.slice(7, 7 + 16)).toEqual(Array(16).fill(2));
    expect(sizes.slice(7 + 16, 7 + 19)).toEqual([4, 2, 2]);
    await until(() => agent.status("fake").batchSize === 2);
    expect(agent.status("fake").batchCap).toBe(2); // the heartbeat says why it is below the plan's 8
    expect(results.every((r) => r.ok)).toBe(true);
    await settled(agent.stop());
  });

  it("a batch cut short by a new plan mid-split hands back what it did not run", async () => {
    const { agent, queue, results } = setup(1);
    let runs = 0;
    const sizes = failWhen(agent, (m) => {
      if (m === "a" && ++runs === 1) agent.applyPlan(plan(2, "b", 4)); // the plan moves the worker during the first run
      return m === "a" ? "CUDA out of memory" : null;
    });
    for (let i = 0; i < 4; i++) queue.push("a", item("a", `k${i}`, undefined, `prompt ${i}`));
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => agent.status("fake").model === "b");
    expect(sizes).toEqual([4]); // no splitting for a model being left
    expect(results).toEqual([]);
    expect(queue.queues.get("a")?.length).toBe(4); // all four handed back (their first delivery)
    await settled(agent.stop());
  });

  it("a batch that failed does not run again, in its halves, the items whose deadline passed while it ran", async () => {
    const { agent, queue, results } = setup(1);
    // The worker's clock, moved on by two minutes while the whole batch fails: two of its items expire meanwhile.
    const ports = agent as unknown as { ports: { now: () => number } };
    let offsetMs = 0;
    ports.ports.now = () => Date.now() + offsetMs;
    const sizes = failWhen(agent, (_m, batch) => {
      if (batch.length !== 4) return null;
      offsetMs = 120_000;
      return "CUDA out of memory";
    });
    for (let i = 0; i < 4; i++) queue.push("a", item("a", `d${i}`, Date.now() + (i % 2 ? 60_000 : 600_000), `prompt ${i}`));
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => results.length === 2 && agent.dropped.expired === 2);
    expect(sizes).toEqual([4, 1, 1]); // each half held one live item
    expect(results.map((r) => r.requestId).sort()).toEqual(["d0", "d2"]);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(queue.termed).toHaveLength(2);
    await settled(agent.stop());
  });

  it("items on their last delivery are answered, not handed back to sit in the queue until their deadline", async () => {
    const { agent, queue, results } = setup(1);
    queue.maxDeliver = 1; // every delivery is the last
    let runs = 0;
    failWhen(agent, (m, batch) => {
      if (m !== "a") return null;
      runs++;
      if (batch.length === 4) return "CUDA out of memory"; // split in two halves
      if (runs === 2) agent.applyPlan(plan(2, "b", 4)); // the plan moves the worker during the first half: the second is not run
      return null;
    });
    for (let i = 0; i < 4; i++) queue.push("a", item("a", `f${i}`, undefined, `prompt ${i}`));
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => agent.status("fake").model === "b");
    expect(queue.queues.get("a")?.length).toBe(0); // nothing handed back
    expect(queue.termed).toHaveLength(2);
    expect(results.map((r) => (r.ok ? `${r.requestId} ok` : `${r.requestId} ${r.error.code}`)).sort()).toEqual([
      "f0 ok",
      "f1 ok",
      "f2 no_capacity",
      "f3 no_capacity",
    ]);
    await settled(agent.stop());
  });

  it("a last delivery that reaches a pull called off (the plan moved the worker) is answered no_capacity, not dropped", async () => {
    const { agent, queue, results } = setup(1);
    const late = item("a", "late-1");
    const termed: string[] = [];
    // The queue delivers the item only as the pull is called off: it cannot go back (its last delivery).
    (queue as WorkSource).pull = async (_model, _max, _waitMs, signal, lastCalledOff) => {
      await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
      lastCalledOff?.({
        item: late,
        deliveryCount: 5,
        final: true,
        ack: () => undefined,
        nak: () => undefined,
        term: () => void termed.push("late-1"),
        working: () => undefined,
      });
      return [];
    };
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => agent.status("fake").state === "serving");
    await vi.advanceTimersByTimeAsync(20); // pulling
    agent.applyPlan(plan(2, "b", 4));
    await until(() => results.length > 0);
    expect(results.map((r) => (r.ok ? "ok" : `${r.requestId} ${r.error.code}`))).toEqual(["late-1 no_capacity"]);
    expect(termed).toEqual(["late-1"]);
    await settled(agent.stop());
  });

  it("a failed item on its last delivery gets the generation error, not a hand-back", async () => {
    const { agent, queue, results } = setup(1);
    queue.maxDeliver = 1;
    let runs = 0;
    failWhen(agent, (m) => {
      if (m === "a" && ++runs === 1) agent.applyPlan(plan(2, "b", 4));
      return m === "a" ? "CUDA out of memory" : null;
    });
    queue.push("a", item("a", "g0"));
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => agent.status("fake").model === "b");
    expect(queue.queues.get("a")?.length).toBe(0);
    expect(results.map((r) => (r.ok ? "ok" : r.error.code))).toEqual(["generation_failed"]);
    await settled(agent.stop());
  });

  it("a backend that returns fewer images than asked fails the batch once, answering no item twice", async () => {
    const { agent, queue, results } = setup(1);
    const ports = (agent as unknown as { ports: { backend: GenerationBackend } }).ports;
    const base = { ...ports.backend };
    ports.backend = { ...base, generate: async (m, batch) => (await base.generate(m, batch)).slice(1) };
    for (const id of ["x", "y"]) {
      const queued = item("a", id);
      queue.deliveries.set(queued, 1);
      queue.push("a", queued);
    }
    agent.applyPlan(plan(1, "a", 4));
    agent.start();
    await until(() => results.length === 2);
    await vi.advanceTimersByTimeAsync(30);
    expect(results.map((r) => [r.requestId, r.ok])).toEqual([
      ["x", false],
      ["y", false],
    ]);
    expect(queue.acked).toHaveLength(2);
    expect(agent.status("fake").servedTotal).toBe(0);
    await settled(agent.stop());
  });
});
