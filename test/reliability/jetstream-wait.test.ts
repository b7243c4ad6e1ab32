/**
 * Services started with a JetStream cluster that is still forming (one node of three up, so no
 * JetStream leader yet): with a NATS wait they keep trying their JetStream set-up until the
 * cluster answers, instead of exiting at their first JetStream call.
 */
import { afterAll, describe, expect, it } from "vitest";
import { freePort, startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { startSystemWhenUp, type RunningSystem } from "../../services/system.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { clusterConfig } from "../helpers/cluster.ts";
import { waitFor } from "../helpers/processes.ts";

const servers: LocalServer[] = [];
let system: RunningSystem | undefined;

afterAll(async () => {
  await system?.stop(2_000);
  await Promise.all(servers.map((s) => s.stop()));
});

describe("a JetStream cluster still forming", () => {
  it("is waited for: the services start once it has a leader", async () => {
    const names = ["n1", "n2", "n3"];
    const clusterPorts = [await freePort(), await freePort(), await freePort()];
    const monitorPorts = [await freePort(), await freePort(), await freePort()];
    const start = (i: number) =>
      startNatsServer({ serverName: names[i], extraConfig: clusterConfig(names[i], clusterPorts[i], monitorPorts[i], clusterPorts) });
    servers.push(await start(0));
    const waiting: string[] = [];
    const log = createLogger("test", "error");
    const started = startSystemWhenUp({
      natsUrl: servers[0].url,
      services: ["router"],
      replicas: 3,
      natsWaitMs: 60_000,
      log,
      onWaiting: (what) => void waiting.push(what),
    });
    let done = false;
    void started.then(
      () => (done = true),
      () => (done = true),
    );
    // Its first JetStream call fails (no leader), and it tries again rather than fail the start.
    await waitFor(() => waiting.length > 0 || done, 30_000, "the first JetStream failure");
    console.log(`jetstream-wait: first failure ${JSON.stringify(waiting[0])}`);
    expect(done).toBe(false);
    expect(waiting).toHaveLength(1);
    servers.push(await start(1), await start(2));
    system = await started;
    expect(system.routers).toHaveLength(1);
  }, 90_000);
});
