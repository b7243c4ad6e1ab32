/** Starts a real nats-server on a free port and the HADIS services against it, for one test file. */
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, inboxPrefix, newInbox, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import { startSystem, type RunningSystem, type SystemOptions } from "../../services/system.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { rmSync } from "node:fs";

/** A test system: server, services, and a client connection. */
export interface TestSystem {
  server: LocalServer;
  system: RunningSystem;
  nc: NatsConnection;
  client: HadisClient;
  stop(): Promise<void>;
}

/**
 * The services of a test: 4 fast workers, fixed routes, in-memory queues, quiet logs; `opts`
 * override. Resolves once the first plan assigns every worker and they serve; throws (after
 * stopping them) when that takes longer than `readyWithinMs`.
 */
export async function startTestServices(
  natsUrl: string,
  opts: Partial<SystemOptions> = {},
  readyWithinMs = 10_000,
): Promise<RunningSystem> {
  const system = await startSystem({
    natsUrl,
    workers: 4,
    timeScale: 0.001,
    tickMs: 500,
    // Fixed routes unless a test asks for a planner: route tests need to know the thresholds.
    policy: "static",
    scorer: "reference",
    workQueue: { storage: "memory", ackWaitMs: 2_000 },
    log: createLogger("test", (process.env.HADIS_LOG as "info") ?? "error"),
    ...opts,
  });
  // Wait until the first plan assigns every worker and they all serve (no wait without workers).
  const want = !opts.services || opts.services.includes("worker") ? (opts.workers ?? 4) : 0;
  const deadline = Date.now() + readyWithinMs;
  for (;;) {
    const plan = system.manager?.plans.current;
    const states = system.workers?.agents.map((a) => a.status("x").state) ?? [];
    const ready = states.filter((s) => s === "serving").length;
    // Without a manager of its own (more workers for a running system), serving is the sign.
    const planned = !system.manager || (plan && Object.keys(plan.assignment).length >= want);
    if (planned && ready >= want) return system;
    if (Date.now() >= deadline) {
      // A test on a system that never got ready would test something else than it says.
      await system.stop(2_000).catch(() => undefined);
      throw new Error(
        `test system not ready after ${readyWithinMs} ms: plan ${plan ? `epoch ${plan.epoch} assigning ${Object.keys(plan.assignment).length} of ${want} workers` : system.manager ? "none yet" : "not ours"}, workers ${JSON.stringify(states)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts everything; waits until the first plan assigns every worker. */
export async function startTestSystem(opts: Partial<SystemOptions> = {}): Promise<TestSystem> {
  const server = await startNatsServer();
  // Not ready in time: the services are stopped, and so must the server be.
  const system = await startTestServices(server.url, opts).catch(async (err: unknown) => {
    await server.stop();
    throw err;
  });
  const nc = await connectNats(server.url, "test-client");
  return {
    server,
    system,
    nc,
    client: new HadisClient(nc),
    async stop() {
      await nc.close();
      await system.stop(2_000);
      await server.stop();
    },
  };
}

/** The `$SRV.STATS` of the instance of a micro service that answers first. */
export async function serviceStats(
  nc: NatsConnection,
  name: string,
): Promise<{ endpoints: { num_requests: number; data: Record<string, unknown> }[] }> {
  const msg = await nc.request(`$SRV.STATS.${name}`, new Uint8Array(), { timeout: 2_000 });
  return JSON.parse(new TextDecoder().decode(msg.data));
}

/** Names of the micro services that answer `$SRV.PING` within half a second. */
export async function pingServices(nc: NatsConnection): Promise<string[]> {
  const seen = new Set<string>();
  const inbox = newInbox(inboxPrefix(nc)); // the observer user reads only its own inboxes
  const sub = nc.subscribe(inbox, { callback: (_e, m) => void seen.add(JSON.parse(new TextDecoder().decode(m.data)).name) });
  nc.publish("$SRV.PING", new Uint8Array(), { reply: inbox });
  await new Promise((r) => setTimeout(r, 500));
  sub.unsubscribe();
  return [...seen].sort();
}

/** Stops what a test file started by hand, in order (client, services, server), and removes its folders; missing parts are skipped. */
export async function stopStarted(parts: {
  nc?: NatsConnection;
  system?: RunningSystem;
  server?: LocalServer;
  dirs?: string[];
}): Promise<void> {
  await parts.nc?.close();
  await parts.system?.stop(2_000);
  await parts.server?.stop();
  for (const dir of parts.dirs ?? []) rmSync(dir, { recursive: true, force: true });
}
