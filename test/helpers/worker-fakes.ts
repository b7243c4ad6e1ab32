/** Fakes of a worker's ports for the WorkerAgent tests: an in-memory queue, a timed backend, plans, and simulated-time helpers. */
import { expect, vi } from "vitest";
import { WorkerAgent, type Delivery, type WorkSource } from "../../actors/worker/worker-agent.ts";
import type { GenerationBackend } from "../../actors/worker/backend.ts";
import type { WorkerPorts } from "../../actors/worker/ports.ts";
import { PROTOCOL_VERSION, type Plan, type WorkItem, type WorkResult } from "../../contracts/messages.ts";

/** An in-memory work queue per model with ack bookkeeping (items typed, as the real queue hands them over). */
export class FakeQueue implements WorkSource {
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

export function item(model: string, id: string, deadlineAtMs = Date.now() + 60_000, prompt = "a cat"): WorkItem {
  return {
    v: PROTOCOL_VERSION,
    requestId: id,
    stage: "light",
    prompt,
    seed: 1,
    model,
    replyTo: "r",
    enqueuedAtMs: Date.now(),
    deadlineAtMs,
    planEpoch: 1,
  };
}

export function plan(epoch: number, model: string | null, batchSize = 4): Plan {
  return {
    v: PROTOCOL_VERSION,
    epoch,
    policy: "t",
    issuedAtMs: 0,
    sloMs: 1000,
    timeScale: 1,
    pair: { light: "a", heavy: "b" },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: 0,
    models: { a: { workers: 1, batchSize }, b: { workers: 0, batchSize: 1 } },
    assignment: model ? { w: model } : {},
    reason: "",
  };
}

/** A worker "w" on a backend taking `genMs` a batch; `ports` adds to (or replaces) its fake ports (a judge, an observer). */
export function setup(genMs = 20, loadRetryMs = 10, failedBatchesToReport?: number, ports: Partial<WorkerPorts> = {}) {
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
  const agent = new WorkerAgent(
    "w",
    {
      source: queue,
      publishResult: (_to, r) => void results.push(r),
      backend,
      now: Date.now,
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
      log: () => undefined,
      ...ports,
    },
    { pollMs: 5, workingEveryMs: 1_000, loadRetryMs, ...(failedBatchesToReport ? { failedBatchesToReport } : {}) },
  );
  return { agent, queue, events, results };
}

/** Makes the agent's backend fail a batch with the message `fails` gives for it (null: it runs); returns the sizes of the batches it is given. */
export function failWhen(agent: WorkerAgent, fails: (model: string, batch: readonly { prompt: string }[]) => string | null): number[] {
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
export const until = async (check: () => boolean) => {
  for (let i = 0; i < 400 && !check(); i++) await vi.advanceTimersByTimeAsync(5);
  expect(check()).toBe(true);
};

/** Advances the simulated clock until `promise` settles (a stop that waits for a batch or a pause), at most 60 s. */
export async function settled<T>(promise: Promise<T>): Promise<T> {
  let done = false;
  const watched = promise.finally(() => (done = true));
  for (let i = 0; i < 12_000 && !done; i++) await vi.advanceTimersByTimeAsync(5);
  return watched;
}
