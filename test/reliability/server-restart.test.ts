/**
 * The nats-server itself restarted (killed, then started again on the same port and JetStream
 * folder) under a serving system. nats.js drops whatever a connection publishes while it is down
 * (its buffer is reset on each reconnect), so: a request made meanwhile is sent once the
 * client is back, and a worker's pull that the old server took with it is asked again at once,
 * not after its silence and a pause (both were lost before: the request waited out its
 * deadline, the workers idled for up to 6 s after the restart).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HadisClient } from "../../services/client/client.ts";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, watchConnection, type NatsConnection } from "../../services/nats/connection.ts";
import type { RunningSystem } from "../../services/system.ts";
import { startTestServices } from "../helpers/system.ts";
import { waitFor } from "../helpers/processes.ts";

let dataDir: string;
let server: LocalServer;
let system: RunningSystem;
let nc: NatsConnection;
let client: HadisClient;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "hadis-restart-"));
  server = await startNatsServer({ dataDir });
  // The work queue on file, as by default: it outlives the restart.
  system = await startTestServices(server.url, { timeScale: 0.01, workQueue: { storage: "file", ackWaitMs: 2_000 } });
  nc = await connectNats(server.url, "test");
  client = new HadisClient(nc);
  await client.waitUntilServing(20_000);
}, 40_000);

afterAll(async () => {
  await nc?.close();
  await system?.stop(2_000);
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Kills the server, and starts it again on its port and folder after `downMs`. */
async function restart(downMs: number): Promise<void> {
  const port = server.port;
  server.kill("SIGKILL");
  await new Promise((r) => setTimeout(r, downMs));
  rmSync(join(dataDir, "nats-server.pid"), { force: true });
  server = await startNatsServer({ dataDir, port });
}

describe("a nats-server restarted under load", () => {
  it("answers the requests made while it was down", async () => {
    const restarted = restart(1_000);
    await waitFor(() => !watchConnection(nc).connected, 1_000, "the client to see the server gone");
    const calls = Array.from({ length: 8 }, (_, i) => client.generate({ prompt: `a lighthouse at dusk ${i}`, deadlineMs: 10_000 }));
    await restarted;
    const results = await Promise.allSettled(calls);
    const failed = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
    expect(failed).toEqual([]);
  }, 30_000);

  it("serves at once once it is back: workers ask again for the pulls it took with it", async () => {
    // Idle workers hold 1 s pulls; the ones in flight now die with the server. Before, a worker
    // noticed only after 4 s of silence and then paused 2 s: these 2 s deadlines ran out first.
    const dropped = Date.now();
    await restart(500);
    expect(await watchConnection(nc).untilConnected(5_000)).toBe(true);
    const calls = Array.from({ length: 4 }, (_, i) => client.generate({ prompt: `a red bicycle ${i}`, deadlineMs: 2_000 }));
    const results = await Promise.allSettled(calls);
    const failed = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
    expect(failed).toEqual([]);
    console.log(`server down 500 ms: 4 requests made ${Date.now() - dropped} ms after the kill all answered`);
  }, 30_000);
});
