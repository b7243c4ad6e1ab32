/**
 * Capacity truth with the services as separate processes (`hadis serve`): the only worker process
 * is SIGKILLed. Requests in flight on it are answered `no_capacity` once its silence shows (not at
 * their 30 s deadline), a new request is answered `no_capacity` at once with a retry hint,
 * `hadis status` says "not serving" and exits 2, and the manager's plan says it has no worker.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import { HadisError } from "../../contracts/errors.ts";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { readStatus } from "../../services/cli/status.ts";
import { spawnHadis, stopSpawned, waitFor, type Spawned } from "../helpers/processes.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";

let server: LocalServer;
let nc: NatsConnection;
const procs: Record<string, Spawned> = {};

beforeAll(async () => {
  server = await startNatsServer();
  // Time scale 0.1: a heavy image (sd3.5-medium) takes 1.3 s, so requests are still running when the worker dies.
  const common = ["--nats", server.url, "--time-scale", "0.1", "--storage", "memory", "--policy", "static"];
  procs.manager = spawnHadis(["serve", "resource-manager", ...common]);
  procs.judge = spawnHadis(["serve", "discriminator", ...common]);
  procs.router = spawnHadis(["serve", "router", "--scorer", "reference", ...common]);
  procs.workers = spawnHadis(["serve", "worker", "--workers", "1", "--id-prefix", "only", ...common]);
  nc = await connectNats(server.url, "test");
}, 60_000);

afterAll(async () => {
  await stopSpawned();
  await nc?.close();
  await server?.stop();
});

describe("the only worker process SIGKILLed", () => {
  it("answers no_capacity instead of waiting out deadlines, and hadis status says not serving", async () => {
    const client = new HadisClient(nc);
    await client.waitUntilServing(40_000);
    const hard = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold).heavy;
    const before = await readStatus(nc, buildSubjects(), 1_200);
    expect(before.serving).toBe(true);

    // Two hard prompts (1.3 s on the heavy model each) in flight, then the worker process dies.
    const sentAt = Date.now();
    const inFlight = [0, 1].map((i) =>
      client.generate({ prompt: `${hard} ${i}`, deadlineMs: 30_000 }).then(
        () => null,
        (err: unknown) => ({ err: err as HadisError, afterMs: Date.now() - sentAt }),
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    procs.workers.child.kill("SIGKILL");
    const killedAt = Date.now();

    const failed = await Promise.all(inFlight);
    for (const f of failed) {
      expect(f?.err.code, String(f?.err)).toBe("no_capacity");
      // Once the worker's silence shows (3 s) and the router's once-a-second sweep sees it: not at the 30 s deadline.
      expect(f!.afterMs).toBeLessThan(8_000);
    }
    // Their items left the work queue with them (a worker back before their deadline would make images nobody waits for).
    const jsm = await jetstreamManager(nc);
    await waitFor(async () => (await jsm.streams.info("HADIS_WORK")).state.messages === 0, 1_000, "the answered requests' items removed");

    // status: not serving, and exit code 2.
    await waitFor(async () => !(await readStatus(nc, buildSubjects(), 1_100)).serving, 10_000, "status not serving");
    const status = spawnHadis(["status", "--nats", server.url]);
    expect(await status.exited).toBe(2);
    expect(status.output()).toMatch(/^not serving: no worker heard within 1500 ms/m);

    // A new request: no_capacity within 2 s, with a retry hint.
    const asked = Date.now();
    const err = await client.generate({ prompt: "a red bicycle", deadlineMs: 30_000 }).then(
      () => null,
      (e: unknown) => e as HadisError,
    );
    expect(Date.now() - asked).toBeLessThan(2_000);
    expect(err).toBeInstanceOf(HadisError);
    expect(err!.code).toBe("no_capacity");
    expect(err!.details.retryAfterMs).toBeGreaterThan(0);

    // The manager's plan has no worker, and says why (within a few seconds of the kill, whatever its tick).
    await waitFor(
      async () =>
        (await readStatus(nc, buildSubjects(), 200)).plan?.assignment !== undefined &&
        Object.keys((await readStatus(nc, buildSubjects(), 200)).plan!.assignment).length === 0,
      10_000,
      "a plan without workers",
    );
    const plan = (await readStatus(nc, buildSubjects(), 200)).plan!;
    expect(plan.reason).toMatch(/^no worker heard from for 3000 ms: /);
    expect(Date.now() - killedAt).toBeLessThan(15_000);
  }, 90_000);
});
