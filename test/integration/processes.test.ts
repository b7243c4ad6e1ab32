/**
 * The services as separate processes (a multi-machine deployment on one host): each started
 * with `hadis serve <kind> --nats <url>`, a request served through all four, then SIGTERM to
 * each: it stops intake, finishes in-flight work and exits 0.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import { spawnHadis, stopSpawned, waitFor, type Spawned } from "../helpers/processes.ts";
import { serviceStats } from "../helpers/system.ts";
import { freePort } from "../../services/nats/server.ts";
import { ServiceNames } from "../../contracts/subjects.ts";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Requests the router instance that answers has taken in so far (its service stats). */
async function routerTaken(conn: NatsConnection): Promise<number> {
  return (await serviceStats(conn, ServiceNames.router)).endpoints.reduce((n, e) => n + e.num_requests, 0);
}

let server: LocalServer;
let nc: NatsConnection;
let metricsPort: number;
const procs: Record<string, Spawned> = {};

beforeAll(async () => {
  server = await startNatsServer();
  const common = ["--nats", server.url, "--time-scale", "0.002", "--storage", "memory"];
  procs.manager = spawnHadis(["serve", "resource-manager", ...common]);
  procs.judge = spawnHadis(["serve", "discriminator", ...common]);
  procs.workers = spawnHadis(["serve", "worker", "--workers", "3", "--id-prefix", "gpu", ...common]);
  metricsPort = await freePort();
  // The router's /metrics on every address, as a Prometheus on another host would scrape it.
  procs.router = spawnHadis(["serve", "router", "--metrics-port", String(metricsPort), "--metrics-host", "0.0.0.0", ...common]);
  nc = await connectNats(server.url, "test");
}, 60_000);

afterAll(async () => {
  await stopSpawned(); // the services above, and any `hadis start` a failed test left running
  await nc?.close();
  await server?.stop();
});

describe("services as separate processes", () => {
  it("serve requests end to end", async () => {
    const client = new HadisClient(nc);
    await client.waitUntilServing(40_000);
    const settled = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => client.generate({ prompt: `a boat ${i}`, deadlineMs: 20_000 })),
    );
    // A failure names its request, code and details, with the end of each process's log: enough
    // to tell a lost delivery from a lost result next time (it failed once in 18 full runs).
    const failed = settled.flatMap((s, i) =>
      s.status === "rejected"
        ? [
            `request ${i}: ${(s.reason as { code?: string })?.code ?? "no code"}: ${String(s.reason)} ${JSON.stringify((s.reason as { details?: unknown })?.details ?? {})}`,
          ]
        : [],
    );
    const logs = () =>
      Object.entries(procs)
        .map(([name, p]) => `--- ${name}\n${p.output().slice(-3_000)}`)
        .join("\n");
    expect(failed, failed.length ? `${failed.join("\n")}\n${logs()}` : "").toEqual([]);
    const replies = settled.map((s) => (s as PromiseFulfilledResult<Awaited<ReturnType<HadisClient["generate"]>>>).value);
    expect(replies.map((r) => r.planEpoch).every((e) => e >= 1)).toBe(true);
    expect(procs.router.output()).toContain(`metrics on http://0.0.0.0:${metricsPort}/metrics`);
    // The shared flags: the judge reads no work queue, and says so of --storage; the others read all they were given.
    expect(procs.judge.output()).toContain(
      "hadis serve: warning: --storage does nothing for the discriminator service (read by: router, worker, resource-manager)",
    );
    for (const name of ["manager", "workers", "router"]) expect(procs[name].output()).not.toContain("does nothing");
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const served = [...text.matchAll(/^hadis_requests_total\{[^}]*outcome="ok"[^}]*\} (\d+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
    expect(served).toBeGreaterThanOrEqual(20); // and waitUntilServing's probes
    // A second service on the router's metrics port ends before joining, saying which flag to change (was a bare `listen EADDRINUSE`).
    const taken = spawnHadis(["serve", "discriminator", "--metrics-port", String(metricsPort), "--nats", server.url]);
    expect(await taken.exited).toBe(2);
    expect(taken.output()).toContain(
      `hadis serve: metrics port 127.0.0.1:${metricsPort} is already in use: pick another with --metrics-port`,
    );
  }, 60_000);

  it("`hadis serve gateway` answers HTTP through the services, and exits 0 on SIGTERM", async () => {
    const httpPort = await freePort();
    const gateway = spawnHadis(["serve", "gateway", "--nats", server.url, "--http-port", String(httpPort), "--storage", "memory"]);
    await waitFor(() => gateway.output().includes("hadis gateway serving"), 30_000, "the gateway's line");
    expect(gateway.output()).toContain(
      "hadis serve: warning: --storage does nothing for the gateway service (read by: router, worker, resource-manager)",
    );
    const res = await fetch(`http://127.0.0.1:${httpPort}/v1/generate`, {
      method: "POST",
      body: JSON.stringify({ prompt: "a red bicycle", deadlineMs: 20_000 }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { route: string }).route).toMatch(/light|heavy/);
    expect((await fetch(`http://127.0.0.1:${httpPort}/readyz`)).status).toBe(200);
    gateway.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
  }, 60_000);

  it("each exits 0 on SIGTERM after finishing in-flight work", async () => {
    const client = new HadisClient(nc);
    // Requests in flight while the router is asked to stop are still answered.
    const taken = await routerTaken(nc);
    const inFlight = Array.from({ length: 10 }, (_, i) => client.generate({ prompt: `a kite ${i}`, deadlineMs: 20_000 }));
    // In flight means the router has them (a request still on its way when it stops is refused).
    await waitFor(async () => (await routerTaken(nc)) >= taken + 10, 10_000, "the router taking the 10 requests");
    procs.router.child.kill("SIGTERM");
    const settled = await Promise.allSettled(inFlight);
    expect(settled.filter((s) => s.status === "fulfilled").length).toBe(10);
    expect(await procs.router.exited).toBe(0);
    for (const name of ["workers", "judge", "manager"]) {
      procs[name].child.kill("SIGTERM");
      expect(await procs[name].exited, procs[name].output().slice(-2000)).toBe(0);
    }
  }, 60_000);

  it("`hadis start` (what npm start runs) serves, refuses a taken port, and Ctrl-C leaves no process behind", async () => {
    const port = await freePort();
    const dataDir = mkdtempSync(join(tmpdir(), "hadis-start-"));
    const dashboardPort = await freePort();
    const httpPort = await freePort();
    const start = spawnHadis(
      [
        "start",
        "--port",
        String(port),
        "--data-dir",
        dataDir,
        "--workers",
        "4",
        "--time-scale",
        "0.05",
        "--dashboard-port",
        String(dashboardPort),
        "--http-port",
        String(httpPort),
      ],
      {},
      { group: true },
    );
    await waitFor(() => start.output().includes("HADIS is serving"), 40_000, "start banner");
    expect(start.output()).toContain(`nats://127.0.0.1:${port}`);
    // Then a line once the plan's models are loaded (loads take 0.4–0.7 s at time scale 0.05).
    await waitFor(
      () => /HADIS models loaded [\d.]+ s after start: \S+ on [1-4] of [1-4] workers?/.test(start.output()),
      20_000,
      "models loaded line",
    );
    const nc2 = await connectNats(`nats://127.0.0.1:${port}`, "t2");
    const reply = await new HadisClient(nc2).generate({ prompt: "a red bicycle", deadlineMs: 20_000 });
    expect(reply.image.byteLength).toBeGreaterThan(0);
    await nc2.close();
    // The HTTP gateway it runs: the curl walkthrough's request.
    expect(start.output()).toContain(`HTTP API: http://127.0.0.1:${httpPort}/v1/generate`);
    const png = await fetch(`http://127.0.0.1:${httpPort}/v1/generate`, {
      method: "POST",
      body: JSON.stringify({ prompt: "a red bicycle" }),
      headers: { accept: "image/png" },
    });
    expect([png.status, png.headers.get("content-type")]).toEqual([200, "image/png"]);
    expect(
      Buffer.from(await png.arrayBuffer())
        .subarray(1, 4)
        .toString(),
    ).toBe("PNG");

    const second = spawnHadis(["start", "--port", String(port), "--data-dir", `${dataDir}-2`, "--no-http"]);
    expect(await second.exited).toBe(2);
    expect(second.output()).toMatch(/port \d+ on 127\.0\.0\.1 is already in use/);
    // Another port on the same data dir: two servers would share one JetStream store.
    const third = spawnHadis(["start", "--port", String(await freePort()), "--data-dir", dataDir, "--no-http"]);
    expect(await third.exited).toBe(2);
    expect(third.output()).toMatch(/data dir .* is in use by nats-server pid \d+/);
    // A taken dashboard port too (before, it started without /metrics and the probes, one warning line above the banner).
    const fourth = spawnHadis([
      "start",
      "--port",
      String(await freePort()),
      "--data-dir",
      `${dataDir}-4`,
      "--dashboard-port",
      String(dashboardPort),
      "--no-http",
    ]);
    expect(await fourth.exited).toBe(2);
    expect(fourth.output()).toMatch(
      new RegExp(`dashboard port ${dashboardPort} on 127\\.0\\.0\\.1 is already in use: pick another with --dashboard-port`),
    );
    expect(fourth.output()).not.toContain("HADIS is serving");
    expect(spawnSync("pgrep", ["-f", `${dataDir}-4`], { encoding: "utf8" }).stdout.trim()).toBe("");
    // And a taken HTTP port.
    const fifth = spawnHadis([
      "start",
      "--port",
      String(await freePort()),
      "--data-dir",
      `${dataDir}-4`,
      "--no-dashboard",
      "--http-port",
      String(httpPort),
    ]);
    expect(await fifth.exited).toBe(2);
    expect(fifth.output()).toContain(
      `HTTP port ${httpPort} on 127.0.0.1 is already in use: pick another with --http-port, or start without the gateway (--no-http)`,
    );
    expect(fifth.output()).not.toContain("HADIS is serving");
    expect(spawnSync("pgrep", ["-f", `${dataDir}-4`], { encoding: "utf8" }).stdout.trim()).toBe("");
    rmSync(`${dataDir}-4`, { recursive: true, force: true });
    // A start that fails after its server is up says why, once, and leaves nothing running.
    const failed = spawnHadis([
      "start",
      "--port",
      String(await freePort()),
      "--data-dir",
      `${dataDir}-3`,
      "--backend",
      "onnx",
      "--model-map",
      `${dataDir}-3/no-such-map.json`,
      "--no-dashboard",
      "--no-http",
    ]);
    expect(await failed.exited).toBe(1);
    expect(failed.output()).toMatch(/hadis start: ENOENT: no such file or directory, open '.*no-such-map\.json'/);
    expect(failed.output()).not.toContain("embedded nats-server exited");
    expect(spawnSync("pgrep", ["-f", `${dataDir}-3`], { encoding: "utf8" }).stdout.trim()).toBe("");
    // An unknown policy is refused before anything starts, naming the known ones.
    const typo = spawnHadis([
      "start",
      "--port",
      String(await freePort()),
      "--data-dir",
      `${dataDir}-3`,
      "--policy",
      "nope",
      "--no-dashboard",
      "--no-http",
    ]);
    expect(await typo.exited).toBe(1);
    expect(typo.output()).toContain("argument 'nope' is invalid. Allowed choices are hadis,");
    expect(spawnSync("pgrep", ["-f", `${dataDir}-3`], { encoding: "utf8" }).stdout.trim()).toBe("");
    // So is a weights file that cannot be read (before, it was found after everything had started, and named "analyzer data").
    const weights = spawnHadis([
      "start",
      "--port",
      String(await freePort()),
      "--data-dir",
      `${dataDir}-3`,
      "--analyzer-weights",
      `${dataDir}-3/no-weights.json`,
      "--no-dashboard",
      "--no-http",
    ]);
    expect(await weights.exited).toBe(2);
    expect(weights.output()).toMatch(/^hadis start: router weights .*no-weights\.json: ENOENT/m);
    const model = spawnHadis([
      "start",
      "--port",
      String(await freePort()),
      "--data-dir",
      `${dataDir}-3`,
      "--policy",
      "static",
      "--static-config",
      '{"light":"sd99"}',
      "--no-dashboard",
      "--no-http",
    ]);
    expect(await model.exited).toBe(2);
    expect(model.output()).toMatch(/^hadis start: static plan names unknown model "sd99"$/m);
    expect(spawnSync("pgrep", ["-f", `${dataDir}-3`], { encoding: "utf8" }).stdout.trim()).toBe("");
    rmSync(`${dataDir}-3`, { recursive: true, force: true });

    // Ctrl-C at a terminal signals the whole group (nats-server too, were it in it) with requests
    // in flight: each is answered before the server goes.
    const nc3 = await connectNats(`nats://127.0.0.1:${port}`, "t3");
    const taken = await routerTaken(nc3);
    const inFlight = Array.from({ length: 5 }, (_, i) =>
      new HadisClient(nc3).generate({ prompt: `an old stone bridge over a river ${i}`, deadlineMs: 20_000 }),
    );
    await waitFor(async () => (await routerTaken(nc3)) >= taken + 5, 10_000, "the router taking the 5 requests");
    process.kill(-start.child.pid!, "SIGINT");
    const answered = await Promise.allSettled(inFlight);
    expect(answered.map((a) => a.status)).toEqual(Array(5).fill("fulfilled"));
    await nc3.close();
    expect(await start.exited).toBe(0);
    const left = spawnSync("pgrep", ["-f", dataDir], { encoding: "utf8" }).stdout.trim();
    expect(left).toBe("");
    rmSync(dataDir, { recursive: true, force: true });
  }, 90_000);

  it("`hadis start` says so and exits 1 when its nats-server dies, leaving no process behind", async () => {
    const port = await freePort();
    const dataDir = mkdtempSync(join(tmpdir(), "hadis-start-dies-"));
    const start = spawnHadis(
      ["start", "--port", String(port), "--data-dir", dataDir, "--workers", "2", "--time-scale", "0.05", "--no-dashboard", "--no-http"],
      {},
      { group: true },
    );
    await waitFor(() => start.output().includes("HADIS is serving"), 40_000, "start banner");
    const server = spawnSync("pgrep", ["-f", `nats-server.*${dataDir}`], { encoding: "utf8" })
      .stdout.trim()
      .split("\n")
      .filter(Boolean);
    expect(server).toHaveLength(1);
    process.kill(Number(server[0]), "SIGKILL");
    expect(await start.exited).toBe(1);
    expect(start.output()).toMatch(/embedded nats-server exited \(SIGKILL\); stopping/);
    expect(spawnSync("pgrep", ["-f", dataDir], { encoding: "utf8" }).stdout.trim()).toBe("");
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);
});
