import { afterAll, describe, expect, it } from "vitest";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { createMover } from "../../services/router/mover.ts";
import { PendingWork, type PendingItem } from "../../services/router/pending.ts";
import { configureTelemetry, ServiceTelemetry, shutdownTelemetry, SpanKind } from "../../services/lib/telemetry.ts";
import { createLogger } from "../../services/lib/log.ts";
import type { MsgHdrs } from "../../services/lib/nats.ts";
import { PROTOCOL_VERSION, type Plan, type WorkItem, type WorkResult } from "../../contracts/messages.ts";
import { encode } from "../../contracts/envelope.ts";

afterAll(() => shutdownTelemetry());

/** A work queue that records what it is asked to do. */
function fakeQueue(removable: boolean) {
  const published: { model: string; msgId: string; headers?: MsgHdrs }[] = [];
  return {
    published,
    remove: async (_seq?: number) => removable,
    publish: async (model: string, _data: Uint8Array, msgId: string, headers?: MsgHdrs) => {
      published.push({ model, msgId, headers });
      return { seq: 100 + published.length, duplicate: false };
    },
  };
}

const item: WorkItem = {
  v: PROTOCOL_VERSION,
  requestId: "req-1",
  stage: "light",
  prompt: "a cat",
  seed: 1,
  model: "sd35-large-turbo",
  replyTo: "hadis.results.r1",
  enqueuedAtMs: 1_700_000_000_000,
  deadlineAtMs: 1_700_000_060_000,
  planEpoch: 3,
};
const plan = { epoch: 4 } as Plan;
/** Each entry's "forget me" function, as the request's abort handler would call it. */
const pendingOf = new Map<PendingItem, () => void>();

function setup(removable: boolean, traced: boolean) {
  const exporter = new InMemorySpanExporter();
  configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
  const telemetry = new ServiceTelemetry("hadis-router", null);
  const queue = fakeQueue(removable);
  const pending = new PendingWork();
  const enqueued: PendingItem[] = [];
  const span = traced ? telemetry.start("light sd35-large-turbo", { kind: SpanKind.PRODUCER }) : undefined;
  const entry: PendingItem = { item: { ...item }, stage: "light", seq: 7, resolve: () => undefined, reject: () => undefined, ...(span ? { span } : {}) };
  pendingOf.set(entry, pending.wait(entry));
  const move = createMover({ queue, pending, telemetry, log: createLogger("test", "error"), afterEnqueue: (e) => void enqueued.push(e) });
  return { exporter, queue, entry, move, enqueued, span, pending };
}

describe("moving a waiting item to the model that now plays its stage", () => {
  it("re-queues it with the stage span's traceparent and marks the span", async () => {
    const { exporter, queue, entry, move, enqueued, span } = setup(true, true);
    await move(entry, "sd35-medium", plan);
    expect(queue.published).toHaveLength(1);
    expect(queue.published[0].model).toBe("sd35-medium");
    expect(queue.published[0].msgId).toBe("req-1/light/sd35-medium/4");
    const sc = span!.spanContext();
    expect(queue.published[0].headers?.get("traceparent")).toBe(`00-${sc.traceId}-${sc.spanId}-01`);
    expect(entry.item.model).toBe("sd35-medium");
    expect(entry.item.planEpoch).toBe(4);
    expect(entry.seq).toBe(101);
    expect(enqueued).toEqual([entry]);
    span!.end();
    const moved = exporter.getFinishedSpans()[0].events.find((e) => e.name === "moved");
    expect(moved?.attributes).toEqual({ "hadis.from": "sd35-large-turbo", "hadis.to": "sd35-medium", "hadis.plan_epoch": 4 });
  });

  it("a request that ended while the move was publishing has its new item removed", async () => {
    const { queue, entry, move, enqueued } = setup(true, false);
    const removed: number[] = [];
    const publish = queue.publish;
    queue.publish = async (...args) => {
      entry.reject(new Error("deadline")); // the request ends meanwhile…
      pendingOf.get(entry)!(); // …and forgets its entry
      return publish(...args);
    };
    queue.remove = async (seq?: number) => (removed.push(seq ?? -1), true);
    await move(entry, "sd35-medium", plan);
    expect(removed).toEqual([7, 101]);
    expect(enqueued).toEqual([]);
  });

  it("a move whose publish fails ends the request with no_capacity and forgets its entry", async () => {
    const { queue, entry, move, pending } = setup(true, false);
    const errors: unknown[] = [];
    entry.reject = (err) => void errors.push(err);
    queue.publish = async () => {
      throw new Error("stream unavailable");
    };
    await move(entry, "sd35-medium", plan);
    expect(errors.map((e) => (e as { code?: string }).code)).toEqual(["no_capacity"]);
    // The request's actor is done with an error: nothing else would forget the entry.
    expect(pending.size).toBe(0);
  });

  it("an untraced request's item moves without headers", async () => {
    const { queue, entry, move } = setup(true, false);
    await move(entry, "sd35-medium", plan);
    expect(queue.published[0].headers).toBeUndefined();
  });

  it("an item a worker already took (not removable) stays where it is", async () => {
    const { queue, entry, move, enqueued } = setup(false, true);
    await move(entry, "sd35-medium", plan);
    expect(queue.published).toEqual([]);
    expect(entry.item.model).toBe("sd35-large-turbo");
    expect(enqueued).toEqual([]);
  });
});

describe("a moved item answered by its old model after all", () => {
  const result = (model: string): Uint8Array =>
    encode({ v: PROTOCOL_VERSION, ok: true, requestId: "req-1", stage: "light", model, workerId: "w", image: new Uint8Array([1]), width: 1, height: 1, batchSize: 1, queueWaitMs: 0, execMs: 1 } satisfies WorkResult);

  it("has its copy for the new model removed (a batch that held it when the plan changed finished)", () => {
    const superseded: number[] = [];
    const pending = new PendingWork((seq) => void superseded.push(seq));
    const answers: string[] = [];
    // Moved: the item now names the new model and its copy's sequence.
    pending.wait({ item: { ...item, model: "sd35-medium" }, stage: "light", seq: 12, resolve: (o) => void answers.push(o.model), reject: () => undefined });
    pending.deliver(result("sd35-large-turbo"));
    expect(answers).toEqual(["sd35-large-turbo"]);
    expect(superseded).toEqual([12]);
  });

  it("a failure of the old copy neither ends the request nor removes the moved copy", () => {
    const superseded: number[] = [];
    const pending = new PendingWork((seq) => void superseded.push(seq));
    const outcomes: string[] = [];
    pending.wait({ item: { ...item, model: "sd35-medium" }, stage: "light", seq: 12, resolve: (o) => void outcomes.push(`ok ${o.model}`), reject: () => void outcomes.push("failed") });
    const failed = { v: PROTOCOL_VERSION, ok: false, requestId: "req-1", stage: "light", model: "sd35-large-turbo", workerId: "w", error: { code: "generation_failed", message: "thread exited", status: 500, retryable: true } };
    pending.deliver(encode(failed));
    expect(outcomes).toEqual([]);
    expect(superseded).toEqual([]);
    expect(pending.orphaned).toBe(1);
    pending.deliver(result("sd35-medium")); // the moved copy answers
    expect(outcomes).toEqual(["ok sd35-medium"]);
  });

  it("an item answered by the model it is queued for removes nothing", () => {
    const superseded: number[] = [];
    const pending = new PendingWork((seq) => void superseded.push(seq));
    pending.wait({ item: { ...item }, stage: "light", seq: 12, resolve: () => undefined, reject: () => undefined });
    pending.deliver(result("sd35-large-turbo"));
    expect(superseded).toEqual([]);
  });
});
