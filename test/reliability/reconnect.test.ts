/**
 * A router whose connection drops while a worker sends its result (the worker and the client
 * keep theirs): the result is gone (core NATS is at most once, and the worker acknowledged its
 * item), so once reconnected the router finds the item gone from the stream and queues it
 * again; the request is answered instead of waiting out its deadline.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import type { RunningSystem } from "../../services/system.ts";
import { startTestServices } from "../helpers/system.ts";
import { startProxy, type Proxy } from "../helpers/proxy.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { waitFor } from "../helpers/processes.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";

let server: LocalServer;
let proxy: Proxy;
/** In front of the manager, the workers and the discriminator. */
let backProxy: Proxy;
let back: RunningSystem;
let front: RunningSystem;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startNatsServer();
  proxy = await startProxy(server.port);
  backProxy = await startProxy(server.port);
  // Real latencies (time scale 1): a light image takes about 1.3 s, long enough to cut the router meanwhile.
  // At time scale 1 a worker loads sd3.5-large in 13.7 s (its profile's loadMs).
  // A 5 s ack wait (as by default; the tests' is 2 s): the worker's cut below is shorter, as a blip
  // is (past the ack wait the item is given out again whatever the worker sends).
  back = await startTestServices(
    backProxy.url,
    {
      services: ["resource-manager", "worker", "discriminator"],
      workers: 2,
      timeScale: 1,
      workQueue: { storage: "memory", ackWaitMs: 5_000 },
    },
    30_000,
  );
  front = await startTestServices(proxy.url, { services: ["router"], timeScale: 1 });
  nc = await connectNats(server.url, "test");
}, 60_000);

afterAll(async () => {
  await nc?.close();
  await front?.stop(2_000);
  await back?.stop(2_000);
  await proxy?.close();
  await backProxy?.close();
  await server?.stop();
});

/**
 * Sends a light request (at time scale 1 its image takes about 1.3 s) and, once its item is in
 * work, cuts `cut` for 2.5 s; returns the image's size, the generations it cost and the time it took.
 */
async function cutWhileInWork(cut: Proxy, seed: number): Promise<{ bytes: number; generations: number; ms: number }> {
  const client = new HadisClient(nc);
  await client.waitUntilServing(20_000);
  const served = () => back.workers!.agents.reduce((n, a) => n + a.status("x").servedTotal, 0);
  const prompt = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold).light;
  const inWork = () => back.workers!.agents.some((a) => a.status("x").inFlight > 0);
  await waitFor(() => !inWork(), 10_000, "earlier generations done");
  const before = served();
  const started = Date.now();
  const reply = client.generate({ prompt, seed, deadlineMs: 20_000 });
  await waitFor(inWork, 5_000, "the item in work");
  cut.cut(2_500);
  const answer = await reply;
  return { bytes: answer.image.byteLength, generations: served() - before, ms: Date.now() - started };
}

describe("a router that loses its connection while its result is sent", () => {
  it("queues the item again once reconnected, and answers", async () => {
    // The router is cut off until after the worker has sent its image and acknowledged it.
    const { bytes, generations, ms } = await cutWhileInWork(proxy, 3);
    expect(bytes).toBeGreaterThan(0);
    expect(generations).toBe(2); // the lost one, and the one queued again
    console.log(`router cut 2.5 s while its result was sent: answered after ${ms} ms, ${generations} generations`);
    expect(ms).toBeLessThan(12_000); // not the 20 s deadline
  }, 40_000);

  it("a worker whose connection drops while it sends its result sends it (and its ack) once back: one generation, not two", async () => {
    // The worker (and the manager and discriminator with it) is cut off until after its image is made.
    const { bytes, generations, ms } = await cutWhileInWork(backProxy, 4);
    expect(bytes).toBeGreaterThan(0);
    // Before: the result and the ack were dropped; the item ran again after the 5 s ack wait.
    expect(generations).toBe(1);
    console.log(`worker cut 2.5 s while its result was sent: answered after ${ms} ms, ${generations} generation`);
  }, 40_000);
});
