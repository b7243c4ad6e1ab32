/**
 * An item whose every delivery went to a worker that died with it (here: a "worker" that pulls and
 * never acknowledges, as a process killed mid-batch leaves it), on a real nats-server: after the
 * last delivery's ack wait JetStream gives up on it and says so in an advisory, and the router
 * fails the request with generation_failed at once instead of leaving it to its deadline, and
 * removes the item (a work-queue stream keeps an unacknowledged item until its max age).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { DEFAULT_WORK_QUEUE, WorkQueue } from "../../services/nats/work-queue.ts";
import { openPlanBucket } from "../../services/nats/kv-buckets.ts";
import { HadisClient } from "../../services/client/client.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { encode } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";
import { stopStarted } from "../helpers/system.ts";
import { waitFor } from "../helpers/processes.ts";

const QUEUE = { ...DEFAULT_WORK_QUEUE, storage: "memory" as const, maxDeliver: 2, ackWaitMs: 700 };
const LIGHT = "sdxl-lightning";

let server: LocalServer;
let system: RunningSystem;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startNatsServer();
  system = await startSystem({ natsUrl: server.url, services: ["router"], workQueue: QUEUE, log: createLogger("test", "error") });
  nc = await connectNats(server.url, "test");
  // The test plays the resource manager: a plan whose workers are the test's "crashing worker" below.
  const plan: Plan = {
    v: PROTOCOL_VERSION,
    epoch: 1,
    policy: "test",
    issuedAtMs: Date.now(),
    sloMs: 60_000,
    timeScale: 1,
    pair: { light: LIGHT, heavy: "sd35-large" },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: 0,
    models: { [LIGHT]: { workers: 1, batchSize: 1 }, "sd35-large": { workers: 1, batchSize: 1 } },
    assignment: { "ghost-0": LIGHT, "ghost-1": "sd35-large" },
    reason: "test",
  };
  await (await openPlanBucket(nc, subjects(), 1, "memory")).put("current", encode(plan));
}, 60_000);

afterAll(() => stopStarted({ nc, system, server }));

/** Counter `hadis_work_given_up_total` of a model in this process's metrics. */
async function givenUp(model: string): Promise<number> {
  return Number(new RegExp(`^hadis_work_given_up_total\\{model="${model}"\\} (\\S+)$`, "m").exec(await metricsText())?.[1] ?? 0);
}

describe("an item no worker ever finished", () => {
  it("fails its request with generation_failed after the last delivery's ack wait, not at the deadline, and leaves the stream", async () => {
    const queue = await WorkQueue.open(nc, subjects(), QUEUE);
    const client = new HadisClient(nc);
    const counted = await givenUp(LIGHT);
    const stop = new AbortController();
    let deliveries = 0;
    // The crashing worker: takes each delivery and never acknowledges it (nor says it is working on it).
    const crashing = (async () => {
      while (!stop.signal.aborted) deliveries += (await queue.pull(LIGHT, 1, 500, stop.signal).catch(() => [])).length;
    })();
    const started = Date.now();
    const outcome = await client.generate({ prompt: "a red bicycle", seed: 1, deadlineMs: 15_000 }).then(
      () => null,
      (err: unknown) => err,
    );
    const ms = Date.now() - started;
    stop.abort();
    await crashing;
    expect(outcome).toBeInstanceOf(HadisError);
    expect((outcome as HadisError).code).toBe("generation_failed");
    expect((outcome as HadisError).message).toMatch(/delivered 2 times and never acknowledged/);
    expect(deliveries).toBe(2);
    // Two ack waits (0.7 s each) and the next pull's turn, far from the 15 s deadline.
    expect(ms).toBeLessThan(6_000);
    expect(await givenUp(LIGHT)).toBe(counted + 1);
    // The router removes the item (without waiting for it: the reply may come first): the stream holds nothing.
    const seq = await queue.lastSeq();
    await waitFor(async () => (await queue.itemAt(seq)) === null, 5_000, "the given-up item removed");
    console.log(`item never acknowledged (max_deliver 2, ack wait 700 ms): generation_failed after ${ms} ms (deadline 15 s)`);
  }, 30_000);
});
