import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WorkerAgent, type Delivery, type WorkSource } from "../../../actors/worker/worker-agent.ts";
import type { GenerationBackend } from "../../../actors/worker/backend.ts";
import { PROTOCOL_VERSION, type Plan, type WorkItem, type WorkResult } from "../../../contracts/messages.ts";

/** An in-memory work queue per model with ack bookkeeping (items typed, as the real queue hands them over). */
class FakeQueue implements WorkSource {
  readonly queues = new Map<string, WorkItem[]>();
  readonly acked: string[] = [];
  readonly termed: number[] = [];
  /** Deliveries of each item so far (the queue's count, as JetStream's ack subject carries it). */
  readonly deliveries = new Map<WorkItem, number>();
  /** Deliveries after which the queue delivers an item no more (JetStream's max_deliver); 0: no limit. */
  maxDeliver = 0;
  push(model: string, item: WorkItem) {
    (this.queues.get(model) ?? this.queues.set(model, []).get(model)!).push(item);
  }
  async pull(lane: string | { worker: string }, max: number, waitMs: number, signal: AbortSignal): Promise<Delivery[]> {
    // A worker's own queue (the artifact's random dispatch) is kept under "@<id>".
    const model = typeof lane === "string" ? lane : `@${lane.worker}`;
    const q = this.queues.get(model) ?? [];
    if (q.length === 0) {
      await new Promise((r) => {
        const t = setTimeout(r, Math.min(waitMs, 5));
        signal.addEventListener("abort", () => (clearTimeout(t), r(undefined)));
      });
      return [];
    }
    return q.splice(0, max).map((item, i) => ({
      item,
      deliveryCount: this.deliveries.set(item, (this.deliveries.get(item) ?? 0) + 1).get(item)!,
      ...(this.maxDeliver > 0 && this.deliveries.get(item)! >= this.maxDeliver ? { final: true } : {}),
      ack: () => void this.acked.push(model),
      term: () => void this.termed.push(i),
      nak: () => q.unshift(item),
      working: () => undefined,
    }));
  }
}

function item(model: string, id: string, deadlineAtMs = Date.now() + 60_000, prompt = "a cat"): WorkItem {
  return { v: PROTOCOL_VERSION, requestId: id, stage: "light", prompt, seed: 1, model, replyTo: "r", enqueuedAtMs: Date.now(), deadlineAtMs, planEpoch: 1 };
}

function plan(epoch: number, model: string | null, batchSize = 4): Plan {
  return {
    v: PROTOCOL_VERSION, epoch, policy: "t", issuedAtMs: 0, sloMs: 1000, timeScale: 1, pair: { light: "a", heavy: "b" },
    routerThreshold: 0, discThreshold: 0, heavyShare: 0, models: { a: { workers: 1, batchSize }, b: { workers: 0, batchSize: 1 } },
    assignment: model ? { w: model } : {}, reason: "",
  };
}

function setup(genMs = 20, loadRetryMs = 10, failedBatchesToReport?: number) {
  const events: string[] = [];
  const results: WorkResult[] = [];
  const backend: GenerationBackend = {
    kind: "fake",
    load: async (m) => void events.push(`load ${m}`),
    unload: async (m) => void events.push(`unload ${m}`),
    generate: async (m, batch) => {
      events.push(`gen ${m} x${batch.length}`);
      await new Promise((r) => setTimeout(r, genMs));
      events.push(`done ${m}`);
      return batch.map(() => ({ image: new Uint8Array([1]), width: 1, height: 1 }));
    },
    close: async () => undefined,
  };
  const queue = new FakeQueue();
  const agent = new WorkerAgent("w", {
    source: queue,
    publishResult: (_to, r) => void results.push(r),
    backend,
    now: Date.now,
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    log: () => undefined,
  }, { pollMs: 5, workingEveryMs: 1_000, loadRetryMs, ...(failedBatchesToReport ? { failedBatchesToReport } : {}) });
  return { agent, queue, events, results };
}

/** Makes the agent's backend fail a batch with the message `fails` gives for it (null: it runs); returns the sizes of the batches it is given. */
function failWhen(agent: WorkerAgent, fails: (model: string, batch: readonly { prompt: string }[]) => string | null): number[] {
  const ports = (agent as unknown as { ports: { backend: GenerationBackend } }).ports;
  const base = { ...ports.backend };
  const sizes: number[] = [];
  ports.backend = {
    ...base,
    generate: async (m, batch) => {
      sizes.push(batch.length);
      const why = fails(m, batch);
      if (why) throw new Error(why);
      return base.generate(m, batch);
    },
  };
  return sizes;
}

/** Advances the simulated clock 5 ms at a time (at most 2 s) until `check` holds. */
const until = async (check: () => boolean) => {
  for (let i = 0; i < 400 && !check(); i++) await vi.advanceTimersByTimeAsync(5);
  expect(check()).toBe(true);
};

/** Advances the simulated clock until `promise` settles (a stop that waits for a batch or a pause), at most 60 s. */
async function settled<T>(promise: Promise<T>): Promise<T> {
  let done = false;
  const watched = promise.finally(() => (done = true));
  for (let i = 0; i < 12_000 && !done; i++) await vi.advanceTimersByTimeAsync(5);
  return watched;
}

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
        if (broken) throw new Error("output \"sample\" has 4 channels, expected 3");
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
    expect(results.map((r) => [r.requestId, r.ok])).toEqual([["p1", false], ["p1-retry", false], ["p2", false]]);
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
    expect(results.slice(0, 3).map((r) => [r.requestId, r.ok])).toEqual([["i0", true], ["i1", true], ["i3", true]]);
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
    expect(results.map((r) => (r.ok ? `${r.requestId} ok` : `${r.requestId} ${r.error.code}`)).sort()).toEqual(["f0 ok", "f1 ok", "f2 no_capacity", "f3 no_capacity"]);
    await settled(agent.stop());
  });

  it("a last delivery that reaches a pull called off (the plan moved the worker) is answered no_capacity, not dropped", async () => {
    const { agent, queue, results } = setup(1);
    const late = item("a", "late-1");
    const termed: string[] = [];
    // The queue delivers the item only as the pull is called off: it cannot go back (its last delivery).
    (queue as WorkSource).pull = async (_model, _max, _waitMs, signal, lastCalledOff) => {
      await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
      lastCalledOff?.({ item: late, deliveryCount: 5, final: true, ack: () => undefined, nak: () => undefined, term: () => void termed.push("late-1"), working: () => undefined });
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
    expect(results.map((r) => [r.requestId, r.ok])).toEqual([["x", false], ["y", false]]);
    expect(queue.acked).toHaveLength(2);
    expect(agent.status("fake").servedTotal).toBe(0);
    await settled(agent.stop());
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
    expect(results.map((r) => [r.requestId, r.ok, r.ok ? r.model : null])).toEqual([["r1", true, "a"], ["r2", true, "a"]]);
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
