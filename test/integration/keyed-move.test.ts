/**
 * A keyed request's item moved off a model the plan left without workers, when two routers wait
 * on it: the first attempt's router (which queued the item) and a retry's (which rides on it), on
 * a real nats-server's work queue and results bucket. The rider must not take the other router's
 * item, and whichever moves second rides on the first's copy: watching the bucket, and queueing its
 * own copy once that one dies unrun. Each router here is its PendingWork and mover, as in
 * services/router/main.ts; the test plays the workers.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { KV } from "../../services/nats/connection.ts";
import { WorkQueue, DEFAULT_WORK_QUEUE } from "../../services/nats/work-queue.ts";
import { openResultsBucket } from "../../services/nats/kv-buckets.ts";
import { createMover } from "../../services/router/mover.ts";
import { PendingWork, type PendingItem } from "../../services/router/pending.ts";
import { ServiceTelemetry } from "../../services/telemetry/tracing.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, type Plan, type WorkItem } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";
import { keyedRequestId } from "../../actors/request/idempotent.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { waitFor } from "../helpers/processes.ts";

const t = useNatsServer("test-keyed-move");
const OLD = "sdxl-lightning";
const NEW = "sd35-large-turbo";
const plan = { epoch: 5 } as Plan;
let queue: WorkQueue;
let results: KV;

beforeAll(async () => {
  queue = await WorkQueue.open(t.nc, subjects(), { ...DEFAULT_WORK_QUEUE, storage: "memory" });
  results = await openResultsBucket(t.nc, subjects());
});

/** One router's side: its waiting entry for the keyed request's light stage and its mover. */
function router(name: string, requestId: string, deadlineAtMs: number, seq: number, own: boolean) {
  const pending = new PendingWork((s) => void queue.remove(s));
  const entry: PendingItem = {
    item: {
      v: PROTOCOL_VERSION,
      requestId,
      stage: "light",
      prompt: "a cat",
      seed: 1,
      model: OLD,
      replyTo: `hadis.result.${name}`,
      enqueuedAtMs: Date.now(),
      deadlineAtMs,
      planEpoch: 4,
    },
    stage: "light",
    seq,
    own,
    resolve: () => undefined,
    reject: () => undefined,
    settled: new Promise(() => undefined),
  };
  pending.wait(entry);
  const move = createMover({
    queue,
    pending,
    results,
    telemetry: new ServiceTelemetry("hadis-router", null),
    log: createLogger("test", "error"),
    afterEnqueue: () => undefined,
  });
  return { entry, move: () => move(entry, NEW, plan) };
}

/** The first attempt's item, as its router queued it. */
async function firstAttempt(label: string, deadlineAtMs: number) {
  const requestId = keyedRequestId(`${label}-${Date.now()}`, "f".repeat(32));
  const item: WorkItem = {
    v: PROTOCOL_VERSION,
    requestId,
    stage: "light",
    prompt: "a cat",
    seed: 1,
    model: OLD,
    replyTo: "hadis.result.r",
    enqueuedAtMs: Date.now(),
    deadlineAtMs,
    planEpoch: 4,
  };
  const { seq } = await queue.publish(OLD, encode(item), `${requestId}/light/${OLD}`);
  return { requestId, seq };
}

/** The items waiting for a model (pulled, read and handed back). */
async function queued(model: string): Promise<WorkItem[]> {
  const got = await queue.pull(model, 16, 300, new AbortController().signal);
  for (const d of got) d.nak();
  return got.map((d) => d.item);
}

describe("moving a keyed item that two routers wait on", () => {
  it("the rider leaves the owner's item alone; the owner, moving second, rides on the rider's copy: one copy for the new model", async () => {
    const deadline = Date.now() + 30_000;
    const { requestId, seq } = await firstAttempt("both", deadline);
    const owner = router("owner", requestId, deadline, seq, true);
    const rider = router("rider", requestId, deadline, seq, false);
    await rider.move();
    // Before, the rider removed the owner's item and the owner's move found nothing to move: it
    // waited on a copy whose result went to the rider alone.
    expect(await queue.itemAt(seq)).not.toBeNull();
    expect(rider.entry.own).toBe(true);
    await owner.move();
    expect(await queue.itemAt(seq)).toBeNull(); // the owner removed its own
    expect(owner.entry.seq).toBe(rider.entry.seq);
    expect(owner.entry.own).toBe(false);
    expect(owner.entry.watched).toBe(true); // its result will come through the bucket
    expect((await queued(NEW)).filter((i) => i.requestId === requestId)).toHaveLength(1);
  }, 20_000);

  it("a router whose move lands on another's copy queues its own once that copy passes its deadline unrun", async () => {
    const theirDeadline = Date.now() + 2_000;
    const ourDeadline = Date.now() + 30_000;
    const { requestId, seq } = await firstAttempt("short", theirDeadline);
    // The first attempt (due soon) and its router move first; this router, the retry's, second.
    const first = router("first", requestId, theirDeadline, seq, true);
    await first.move();
    const theirs = first.entry.seq;
    const second = router("second", requestId, ourDeadline, seq, false);
    await second.move();
    expect(second.entry.seq).toBe(theirs);
    expect(second.entry.own).toBe(false);
    // Nobody takes their copy before its deadline (a worker drops it unrun after it): this router queues its own.
    await waitFor(() => second.entry.own === true, 5_000, "the second router's own copy");
    expect(second.entry.seq).not.toBe(theirs);
    expect(Date.now()).toBeGreaterThanOrEqual(theirDeadline);
    const mine = (await queued(NEW)).filter((i) => i.requestId === requestId && i.deadlineAtMs === ourDeadline);
    expect(mine).toHaveLength(1);
  }, 20_000);
});
