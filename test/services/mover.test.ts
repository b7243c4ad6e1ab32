import { afterAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { createMover } from "../../services/router/mover.ts";
import { PendingWork, type PendingItem } from "../../services/router/pending.ts";
import { configureTelemetry, ServiceTelemetry, shutdownTelemetry, SpanKind } from "../../services/telemetry/tracing.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import type { MsgHdrs } from "../../services/nats/connection.ts";
import { PROTOCOL_VERSION, type Plan, type WorkItem, type WorkResult } from "../../contracts/messages.ts";
import { encode } from "../../contracts/envelope.ts";

afterAll(() => shutdownTelemetry());

/** A work queue that records what it is asked to do. */
function fakeQueue(removable: boolean) {
  const published: { model: string; msgId: string; headers?: MsgHdrs }[] = [];
  return {
    published,
    itemAt: async (_seq: number): Promise<Uint8Array | null | undefined> => null,
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
  const entry: PendingItem = {
    item: { ...item },
    stage: "light",
    seq: 7,
    resolve: () => undefined,
    reject: () => undefined,
    ...(span ? { span } : {}),
  };
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

describe("moving a keyed request's item (a retry may ride on another attempt's)", () => {
  const KEYED = "k-0123456789abcdef0123456789abcdef";
  /** A results bucket with nothing stored whose watches it counts. */
  const emptyBucket = () => {
    const watched: string[] = [];
    const bucket = {
      watched,
      get: async () => null,
      watch: async ({ key }: { key: string }) => {
        watched.push(key);
        return Object.assign((async function* () {})(), { stop: () => undefined });
      },
    };
    return bucket;
  };
  /** A keyed entry waiting on the item at seq 7 (another router's when `own` is false), for a stage that never settles here. */
  function keyedSetup(own: boolean) {
    const queue = fakeQueue(true);
    const removed: number[] = [];
    queue.remove = async (seq?: number) => (removed.push(seq ?? -1), true);
    const pending = new PendingWork();
    const results = emptyBucket();
    const entry: PendingItem = {
      item: { ...item, requestId: KEYED, deadlineAtMs: Date.now() + 60_000 },
      stage: "light",
      seq: 7,
      own,
      resolve: () => undefined,
      reject: () => undefined,
      settled: new Promise(() => undefined),
    };
    pending.wait(entry);
    const enqueued: PendingItem[] = [];
    const telemetry = new ServiceTelemetry("hadis-router", null);
    const move = createMover({
      queue,
      pending,
      results: results as never,
      telemetry,
      log: createLogger("test", "error"),
      afterEnqueue: (e) => void enqueued.push(e),
    });
    return { queue, removed, entry, move, results, enqueued };
  }

  it("a rider leaves the item it rides on to that item's router and queues its own copy for the new model", async () => {
    const { queue, removed, entry, move, enqueued } = keyedSetup(false);
    await move(entry, "sd35-medium", plan);
    // Before, it removed the other router's item: that router's request waited on a copy whose result came to the rider alone.
    expect(removed).toEqual([]);
    expect(queue.published.map((p) => [p.model, p.msgId])).toEqual([["sd35-medium", `${KEYED}/light/sd35-medium`]]);
    expect(entry.seq).toBe(101);
    expect(entry.own).toBe(true);
    expect(enqueued).toEqual([entry]);
  });

  it("a move that lands on a copy another attempt queued first rides on it, and queues its own once that copy's deadline passes", async () => {
    vi.useFakeTimers(); // (the copy's deadline passes on a simulated clock)
    onTestFinished(() => void vi.useRealTimers());
    const { queue, removed, entry, move, results } = keyedSetup(true);
    const moveId = `${KEYED}/light/sd35-medium`;
    // The other attempt moved first: its copy (seq 42) is due in 150 ms, before this request's deadline.
    const theirs = encode({ ...item, requestId: KEYED, model: "sd35-medium", replyTo: "hadis.results.r2", deadlineAtMs: Date.now() + 150 });
    queue.itemAt = async (seq: number) => (seq === 42 ? theirs : null);
    queue.publish = async (model: string, _data: Uint8Array, msgId: string) => {
      queue.published.push({ model, msgId });
      return msgId === moveId ? { seq: 42, duplicate: true } : { seq: 200 + queue.published.length, duplicate: false };
    };
    await move(entry, "sd35-medium", plan);
    expect(removed).toEqual([7]); // its own item, on the model the plan left
    expect(entry.seq).toBe(42);
    expect(entry.own).toBe(false);
    // Its result comes through the bucket, not this router's inbox. (Before: no watch, no timer.)
    expect(results.watched).toEqual([`${KEYED}.light`]);
    // Once the copy ridden on is past its deadline with no image, this request queues its own.
    await vi.advanceTimersByTimeAsync(149);
    expect(entry.own).toBe(false);
    await vi.advanceTimersByTimeAsync(100); // past its deadline and the ride margin (50 ms)
    expect(entry.own).toBe(true);
    expect(queue.published.map((p) => p.msgId)).toEqual([moveId, moveId, `${moveId}@42`]);
    expect(entry.seq).toBe(203);
    expect(entry.item.model).toBe("sd35-medium");
  });

  it("a move that lands on a dead copy (gone, no image stored) queues its own at once", async () => {
    const { queue, entry, move } = keyedSetup(true);
    const moveId = `${KEYED}/light/sd35-medium`;
    queue.publish = async (model: string, _data: Uint8Array, msgId: string) => {
      queue.published.push({ model, msgId });
      return msgId === moveId ? { seq: 42, duplicate: true } : { seq: 300, duplicate: false };
    };
    await move(entry, "sd35-medium", plan);
    expect(queue.published.map((p) => p.msgId)).toEqual([moveId, `${moveId}@42`]);
    expect(entry.seq).toBe(300);
    expect(entry.own).toBe(true);
  });

  it("a move whose publish is asked again (its acknowledgement late) finds its own copy: owned, not ridden on", async () => {
    const { queue, entry, move, results } = keyedSetup(true);
    let mine: Uint8Array | null = null;
    queue.itemAt = async (seq: number) => (seq === 42 ? mine : null);
    queue.publish = async (model: string, data: Uint8Array, msgId: string) => {
      queue.published.push({ model, msgId });
      mine = data; // the first publish landed; its acknowledgement did not come, so the queue asked again
      return { seq: 42, duplicate: true };
    };
    await move(entry, "sd35-medium", plan);
    expect(entry.seq).toBe(42);
    expect(entry.own).toBe(true); // removed when its request ends, as any copy of its own
    expect(results.watched).toEqual([]);
  });

  it("a rider's moved copy is not removed when the item it rode on answers (it is the other router's to remove)", () => {
    const superseded: number[] = [];
    const pending = new PendingWork((seq) => void superseded.push(seq));
    const answers: string[] = [];
    // Riding (after a move that landed on another attempt's copy) on seq 42 for the new model.
    pending.wait({
      item: { ...item, requestId: KEYED, model: "sd35-medium" },
      stage: "light",
      seq: 42,
      own: false,
      resolve: (o) => void answers.push(o.model),
      reject: () => undefined,
    });
    pending.deliver(
      encode({
        v: PROTOCOL_VERSION,
        ok: true,
        requestId: KEYED,
        stage: "light",
        model: "sd35-large-turbo",
        workerId: "w",
        image: new Uint8Array([1]),
        width: 1,
        height: 1,
        batchSize: 1,
        queueWaitMs: 0,
        execMs: 1,
      } satisfies WorkResult),
    );
    expect(answers).toEqual(["sd35-large-turbo"]);
    expect(superseded).toEqual([]);
  });
});

describe("a moved item answered by its old model after all", () => {
  const result = (model: string): Uint8Array =>
    encode({
      v: PROTOCOL_VERSION,
      ok: true,
      requestId: "req-1",
      stage: "light",
      model,
      workerId: "w",
      image: new Uint8Array([1]),
      width: 1,
      height: 1,
      batchSize: 1,
      queueWaitMs: 0,
      execMs: 1,
    } satisfies WorkResult);

  it("has its copy for the new model removed (a batch that held it when the plan changed finished)", () => {
    const superseded: number[] = [];
    const pending = new PendingWork((seq) => void superseded.push(seq));
    const answers: string[] = [];
    // Moved: the item now names the new model and its copy's sequence.
    pending.wait({
      item: { ...item, model: "sd35-medium" },
      stage: "light",
      seq: 12,
      resolve: (o) => void answers.push(o.model),
      reject: () => undefined,
    });
    pending.deliver(result("sd35-large-turbo"));
    expect(answers).toEqual(["sd35-large-turbo"]);
    expect(superseded).toEqual([12]);
  });

  it("a failure of the old copy neither ends the request nor removes the moved copy", () => {
    const superseded: number[] = [];
    const pending = new PendingWork((seq) => void superseded.push(seq));
    const outcomes: string[] = [];
    pending.wait({
      item: { ...item, model: "sd35-medium" },
      stage: "light",
      seq: 12,
      resolve: (o) => void outcomes.push(`ok ${o.model}`),
      reject: () => void outcomes.push("failed"),
    });
    const failed = {
      v: PROTOCOL_VERSION,
      ok: false,
      requestId: "req-1",
      stage: "light",
      model: "sd35-large-turbo",
      workerId: "w",
      error: { code: "generation_failed", message: "thread exited", status: 500, retryable: true },
    };
    pending.deliver(encode(failed));
    expect(outcomes).toEqual([]);
    expect(superseded).toEqual([]);
    expect(pending.orphaned).toBe(1);
    pending.deliver(result("sd35-medium")); // the moved copy answers
    expect(outcomes).toEqual(["ok sd35-medium"]);
  });

  it("a second copy of a result already delivered counts as a duplicate, not an orphan (a worker's send again after a drop)", () => {
    const pending = new PendingWork();
    pending.wait({ item: { ...item }, stage: "light", seq: 12, resolve: () => undefined, reject: () => undefined });
    pending.deliver(result("sd35-large-turbo"));
    pending.deliver(result("sd35-large-turbo")); // sent again once the worker reconnected
    expect([pending.duplicates, pending.orphaned]).toEqual([1, 0]);
    pending.deliver(result("sd35-medium")); // a copy from another model (a move's): an orphan
    expect([pending.duplicates, pending.orphaned]).toEqual([1, 1]);
  });

  it("an item answered by the model it is queued for removes nothing", () => {
    const superseded: number[] = [];
    const pending = new PendingWork((seq) => void superseded.push(seq));
    pending.wait({ item: { ...item }, stage: "light", seq: 12, resolve: () => undefined, reject: () => undefined });
    pending.deliver(result("sd35-large-turbo"));
    expect(superseded).toEqual([]);
  });
});
