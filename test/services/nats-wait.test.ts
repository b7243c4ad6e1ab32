/**
 * Services started before their NATS server (one container before another): they wait for it,
 * trying again every second, and serve once it is up; after the wait they fail with what the
 * connection said, and a failure waiting does not mend (here credentials the server refuses)
 * fails at once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { freePort, startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { isJetStreamNotReady, isServerNotUp } from "../../services/nats/connection.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { connectTool } from "../../services/cli/tool-connection.ts";
import { spawnHadis, stopSpawned, waitFor } from "../helpers/processes.ts";

let server: LocalServer | undefined;
let system: RunningSystem | undefined;

afterEach(async () => {
  await system?.stop(2_000);
  system = undefined;
  await stopSpawned();
  await server?.stop();
  server = undefined;
});

describe("isServerNotUp", () => {
  it("tells a server not up yet from a configuration nobody's waiting mends", () => {
    const refused = Object.assign(new Error("connection refused"), { name: "ConnectionError" });
    const unresolved = Object.assign(new Error("getaddrinfo ENOTFOUND nats"), { code: "ENOTFOUND" });
    const timeout = Object.assign(new Error("timeout"), { name: "TimeoutError" });
    const auth = Object.assign(new Error("Authorization Violation"), { name: "AuthorizationError" });
    // A proxy in front of a server not up yet (Docker's, a mesh's) accepts, then drops the connection.
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    const dropped = Object.assign(new Error("error connecting - node provided an undefined error"), { name: "ConnectionError" });
    const tls = Object.assign(new Error("unable to verify the first certificate"), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" });
    expect([refused, unresolved, timeout, reset, dropped].map(isServerNotUp)).toEqual([true, true, true, true, true]);
    expect([auth, tls, new Error("whatever"), undefined].map(isServerNotUp)).toEqual([false, false, false, false]);
  });
});

describe("isJetStreamNotReady", () => {
  it("tells a JetStream still forming (no leader, peers not known, no answer) from other failures, through causes", () => {
    const timeout = Object.assign(new Error("timeout"), { name: "TimeoutError" });
    const noLeader = new Error("JetStream system temporarily unavailable");
    const wrapped = new Error("router did not start", { cause: new Error("insufficient resources") });
    expect([timeout, noLeader, wrapped].map(isJetStreamNotReady)).toEqual([true, true, true]);
    expect(
      [new Error("Authorization Violation"), new Error("stream name already in use with a different configuration"), undefined].map(
        isJetStreamNotReady,
      ),
    ).toEqual([false, false, false]);
  });
});

describe("a service started before its NATS server", () => {
  it("waits for it and serves once it is up", async () => {
    const port = await freePort();
    const started = startSystem({
      natsUrl: `nats://127.0.0.1:${port}`,
      services: ["router"],
      natsWaitMs: 20_000,
      log: createLogger("test", "error"),
    }).then((s) => (system = s));
    let done = false;
    void started.then(
      () => (done = true),
      () => (done = true),
    );
    await new Promise((r) => setTimeout(r, 1_500));
    expect(done).toBe(false); // still waiting (before, it failed at once: connection refused)
    server = await startNatsServer({ port });
    await started;
    expect(system!.routers).toHaveLength(1);
  }, 30_000);

  it("fails after its wait with what the connection said", async () => {
    const port = await freePort();
    const t0 = Date.now();
    const err = await startSystem({
      natsUrl: `nats://127.0.0.1:${port}`,
      services: ["router"],
      natsWaitMs: 2_000,
      log: createLogger("test", "error"),
    }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/cannot reach NATS at nats:\/\/127\.0\.0\.1:\d+ \(connection refused\)/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2_000);
    expect(Date.now() - t0).toBeLessThan(6_000);
  }, 15_000);

  it("fails at once when the server refuses its credentials (waiting would not mend that)", async () => {
    server = await startNatsServer({ extraConfig: 'authorization { user: "svc", password: "right" }' });
    const t0 = Date.now();
    const err = await startSystem({
      natsUrl: server.url,
      services: ["router"],
      natsWaitMs: 20_000,
      credentials: () => ({ user: "svc", pass: "wrong" }),
      log: createLogger("test", "error"),
    }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/cannot reach NATS at .*Authorization Violation.*are the credentials of svc right/i);
    expect(Date.now() - t0).toBeLessThan(5_000);
  }, 30_000);

  it("`hadis serve` waits by default (--wait-for-nats 60) and says so, then connects", async () => {
    const port = await freePort();
    const run = spawnHadis(["serve", "router", "--nats", `nats://127.0.0.1:${port}`], { HADIS_LOG: "warn" });
    await waitFor(() => run.output().includes("nats.waiting"), 20_000, "the waiting line");
    server = await startNatsServer({ port });
    await waitFor(() => run.output().includes(`hadis router connected to nats://127.0.0.1:${port}`), 20_000, "the router connected");
    expect(run.child.exitCode).toBeNull();
  }, 60_000);
});

describe("a command-line tool given a server list with a node down", () => {
  it("connects to a node that is up, every time, and names every refusal when none is", async () => {
    server = await startNatsServer();
    const down = `nats://127.0.0.1:${await freePort()}`;
    // nats.js shuffles a list; told not to reconnect, it dropped the up node after the down one
    // refused, so before, about half of these failed.
    for (let i = 0; i < 8; i++) {
      const nc = await connectTool(`${down},${server.url}`, {}, "observer", "test-tool");
      expect(nc.getServer()).toBe(server.url.replace("nats://", ""));
      await nc.close();
    }
    const alsoDown = `nats://127.0.0.1:${await freePort()}`;
    await expect(connectTool(`${down},${alsoDown}`, {}, "observer", "test-tool")).rejects.toThrow(
      /cannot reach NATS at .*,.* \(connection refused\)/,
    );
  }, 60_000);
});
