/**
 * The probes of a service process against a real nats-server: `/healthz` answers while the
 * process runs; `/readyz` is 503 for a router without a plan, 200 once a resource manager has
 * published one, 503 while its NATS server is gone and 200 again when it is back, and 503 once
 * the services stop. The same answers come from the metrics port (`hadis serve`) and the
 * dashboard (`npm start`).
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import { startMetricsServer, type MetricsServer } from "../../services/telemetry/metrics.ts";
import { startDashboard, type RunningDashboard } from "../../services/dashboard/main.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { STARTING, type Health } from "../../services/telemetry/health.ts";

const log = createLogger("test", "error");
const dataDir = mkdtempSync(join(tmpdir(), "hadis-health-"));
let server: LocalServer;
let router: RunningSystem | undefined;
let rest: RunningSystem | undefined;
let metrics: MetricsServer | undefined;
let dash: RunningDashboard | undefined;
let dashNc: NatsConnection | undefined;

afterAll(async () => {
  await rest?.stop(1_000);
  await router?.stop(1_000);
  await dash?.stop();
  await dashNc?.close().catch(() => undefined);
  await metrics?.stop();
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function probe(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

async function until(check: () => Promise<boolean> | boolean, ms = 20_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("health probes", () => {
  it("say starting, not ready without a plan, ready with one, not ready while NATS is gone, ready again, and not ready when stopping", async () => {
    server = await startNatsServer({ dataDir });
    let health: () => Health = () => STARTING;
    metrics = await startMetricsServer(0, "127.0.0.1", () => health());
    dashNc = await connectNats(server.url, "test-dashboard");
    dash = await startDashboard({ nc: dashNc, subjects: buildSubjects(), port: 0, log, enableTracing: false, health: () => health() });
    const base = metrics.url.replace(/\/metrics$/, "");
    // Both ports read the same health function; while the state changes (a plan arriving,
    // NATS going away) the two reads may straddle the change, so a pair that differs is read
    // again, and only a difference that persists fails.
    const readyz = async () => {
      let pair = await Promise.all([probe(`${base}/readyz`), probe(`${dash!.url}readyz`)]);
      for (let again = 0; again < 5 && JSON.stringify(pair[0]) !== JSON.stringify(pair[1]); again++) {
        await new Promise((r) => setTimeout(r, 50));
        pair = await Promise.all([probe(`${base}/readyz`), probe(`${dash!.url}readyz`)]);
      }
      const [fromMetrics, fromDashboard] = pair;
      expect(fromDashboard).toEqual(fromMetrics);
      return { status: fromMetrics.status, health: JSON.parse(fromMetrics.body) as Health };
    };

    expect(await probe(`${base}/healthz`)).toEqual({ status: 200, body: "ok\n" });
    expect(await readyz()).toEqual({ status: 503, health: STARTING });

    // A router alone: connected, but nothing to route by.
    router = await startSystem({ natsUrl: server.url, services: ["router"], workQueue: { storage: "memory" }, log });
    health = () => router!.health();
    const alone = await readyz();
    expect(alone.status).toBe(503);
    expect(alone.health.checks.nats).toEqual({ ok: true, detail: "1 connections up" });
    expect(alone.health.checks.plan).toEqual({ ok: false, detail: "no plan yet: a router without one answers no_capacity" });

    // The other services publish a plan: ready.
    rest = await startSystem({
      natsUrl: server.url,
      services: ["resource-manager", "worker", "discriminator"],
      workers: 2,
      workQueue: { storage: "memory" },
      log,
    });
    await until(async () => (await readyz()).status === 200);
    expect((await readyz()).health.checks.plan.detail).toMatch(/^epoch \d+$/);

    // The NATS server goes away: not ready, and why; back on its port: ready again.
    const port = server.port;
    server.kill("SIGKILL");
    await until(async () => (await readyz()).status === 503);
    expect((await readyz()).health.checks.nats.detail).toMatch(new RegExp(`^hadis-router disconnected from 127\\.0\\.0\\.1:${port}`));
    server = await startNatsServer({ port, dataDir });
    await until(async () => (await readyz()).status === 200);

    // Stopping: not ready (the process still answers /healthz).
    await router.stop(1_000);
    const stopped = await readyz();
    expect(stopped.status).toBe(503);
    expect(stopped.health.checks.stopping).toEqual({ ok: false, detail: "stopping" });
    expect(stopped.health.checks.nats.ok).toBe(false);
    expect((await probe(`${base}/healthz`)).status).toBe(200);
    router = undefined;
  }, 60_000);
});
