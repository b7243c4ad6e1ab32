/**
 * A worker's acknowledgement held through a dropped connection names its item by stream
 * sequence. A work queue in memory starts its sequences again when its server restarts, so an
 * acknowledgement held across a restart would remove another item: it is sent only to the server
 * that delivered the item (or when the queue is on file, where sequences survive). Here: the
 * worker's connection is cut (a proxy), its item's ack is held, the server restarts with an empty
 * memory queue, another item lands at the same sequence and is delivered, and the worker comes back.
 */
import { afterAll, describe, expect, it } from "vitest";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, watchConnection, type NatsConnection } from "../../services/nats/connection.ts";
import { DEFAULT_WORK_QUEUE, WorkQueue } from "../../services/nats/work-queue.ts";
import { encode } from "../../contracts/envelope.ts";
import { subjects } from "../../contracts/subjects.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { startProxy, type Proxy } from "../helpers/proxy.ts";
import { waitFor } from "../helpers/processes.ts";

const QUEUE = { ...DEFAULT_WORK_QUEUE, storage: "memory" as const, ackWaitMs: 30_000 };
const MODEL = "sdxl-lightning";
/** A work item whose request id is `label`. */
const workItem = (label: string) =>
  encode({
    v: PROTOCOL_VERSION,
    requestId: label,
    stage: "light",
    prompt: "a cat",
    seed: 1,
    model: MODEL,
    replyTo: "hadis.result.r",
    enqueuedAtMs: Date.now(),
    deadlineAtMs: Date.now() + 60_000,
    planEpoch: 1,
  });
let server: LocalServer | undefined;
let proxy: Proxy | undefined;
const connections: NatsConnection[] = [];

afterAll(async () => {
  for (const nc of connections) await nc.close().catch(() => undefined);
  await proxy?.close();
  await server?.stop();
});

describe("an acknowledgement held across a server restart", () => {
  it("is not sent to a server whose memory queue has another item at that sequence", async () => {
    server = await startNatsServer();
    const port = server.port;
    proxy = await startProxy(port);
    const worker = await connectNats(proxy.url, "worker");
    const test = await connectNats(server.url, "test");
    connections.push(worker, test);
    const first = await (await WorkQueue.open(test, subjects(), QUEUE)).publish(MODEL, workItem("first"), "first");
    const [delivery] = await (await WorkQueue.open(worker, subjects(), QUEUE)).pull(MODEL, 1, 2_000, new AbortController().signal);
    expect(delivery).toBeDefined();
    // The worker is cut off for 4 s; its item is done meanwhile: the ack waits for the reconnect.
    proxy.cut(4_000);
    await waitFor(() => !watchConnection(worker).connected, 2_000, "the worker's drop seen");
    delivery.ack();
    // The server restarts: the queue, in memory, is empty and counts from 1 again.
    server.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 300));
    server = await startNatsServer({ port });
    await waitFor(() => watchConnection(test).connected, 5_000, "the test's reconnect");
    const again = await WorkQueue.open(test, subjects(), QUEUE);
    const second = await again.publish(MODEL, workItem("second"), "second");
    expect(second.seq).toBe(first.seq); // another item at the sequence the held ack names
    // Delivered to the same consumer and not yet acknowledged: an ack of that sequence would remove it.
    expect(await again.pull(MODEL, 1, 2_000, new AbortController().signal)).toHaveLength(1);
    await waitFor(() => watchConnection(worker).connected, 10_000, "the worker's reconnect");
    await new Promise((r) => setTimeout(r, 500)); // what was held has gone out by now
    expect(await again.itemAt(second.seq)).not.toBeNull();
  }, 30_000);
});
