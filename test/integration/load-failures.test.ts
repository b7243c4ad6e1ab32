/**
 * A pool model whose export is broken, live: the whole system (router, real HiGHS resource
 * manager, CLIP judge, four onnx workers on tiny generated models) where `sd35-large`, the heavy
 * model the planner picks at zero demand, maps to a folder missing its UNet. Its loads fail on
 * the workers it is given; the manager takes it out of the pool, plans every worker on the other
 * models, and requests are answered by them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mapWithBrokenExport } from "../helpers/tiny-models.ts";
import { startNatsServer, type LocalServer } from "../../services/lib/nats-server.ts";
import { connectNats, type NatsConnection } from "../../services/lib/nats.ts";
import { HadisClient } from "../../services/lib/client.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import type { Logger } from "../../services/lib/log.ts";
import { decode } from "../../contracts/envelope.ts";
import { WorkerHeartbeatSchema } from "../../contracts/messages.ts";
import { metricsText } from "../../services/lib/metrics.ts";

const BROKEN = "sd35-large";
let server: LocalServer;
let system: RunningSystem;
let nc: NatsConnection;
let client: HadisClient;
const modelsDir = mkdtempSync(join(tmpdir(), "hadis-broken-"));
const events: { event: string; fields: Record<string, unknown> }[] = [];
const failedOn = new Set<string>();
let startedAt = 0;

/** A log that keeps the manager's events (and drops the rest). */
const keep = (event: string, fields: Record<string, unknown> = {}) => void (event.startsWith("manager.") && events.push({ event, fields }));
const log: Logger = { debug: () => undefined, info: keep, warn: keep, error: keep };

async function until(check: () => boolean, ms = 30_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  const modelMap = mapWithBrokenExport(modelsDir, "sdxl", (models) => (models[BROKEN] = { ...models[BROKEN], dir: "broken" }));
  server = await startNatsServer();
  nc = await connectNats(server.url, "test");
  nc.subscribe("hadis.heartbeat.worker.*", {
    callback: (_e, m) => {
      const beat = decode(WorkerHeartbeatSchema, m.data, "heartbeat");
      if (beat.failedModel) failedOn.add(`${beat.workerId}:${beat.failedModel}`);
    },
  });
  startedAt = Date.now();
  system = await startSystem({
    natsUrl: server.url,
    workers: 4,
    workerIdPrefix: "gpu",
    backend: "onnx",
    onnx: { modelsDir, modelMap },
    tickMs: 1_000,
    workQueue: { storage: "memory" },
    log,
  });
  client = new HadisClient(nc);
}, 90_000);

afterAll(async () => {
  await nc?.close();
  await system?.stop(2_000);
  await server?.stop();
  rmSync(modelsDir, { recursive: true, force: true });
});

describe("a pool model that will not load", () => {
  it("is taken out of the pool after failing on two workers; every worker serves the others and requests are answered", async () => {
    const plans = system.manager!.plans;
    await until(() => (plans.current?.reason ?? "").includes(`without ${BROKEN} (failed to load)`));
    const plan = plans.current!;
    const failures = [...failedOn].filter((f) => f.endsWith(`:${BROKEN}`)).length;
    console.log(`load-failures: plan epoch ${plan.epoch} without ${BROKEN} ${Date.now() - startedAt} ms after the system started; ${failures} workers had reported its failed load`);
    expect(plan.models[BROKEN]?.workers ?? 0).toBe(0);
    expect([plan.pair.light, plan.pair.heavy]).not.toContain(BROKEN);
    // The workers that failed were not benched: the model is broken, not they.
    expect(Object.keys(plan.assignment).sort()).toEqual(["gpu-00", "gpu-01", "gpu-02", "gpu-03"]);
    expect(failures).toBeGreaterThanOrEqual(2);
    expect(events.find((e) => e.event === "manager.model_unavailable")?.fields).toEqual({ model: BROKEN });
    // Operators see it in the metrics (an alert on hadis_model_unavailable > 0).
    await system.manager!.tick();
    const metrics = await metricsText();
    expect(metrics).toContain(`hadis_model_unavailable{model="${BROKEN}"} 1`);
    expect(metrics).toContain(`hadis_model_unavailable{model="sd35-medium"} 0`);
    expect(metrics).toMatch(/^hadis_workers_benched 0$/m);

    await until(() => system.workers!.agents.every((a) => a.status("x").state === "serving"));
    const replies = await Promise.all(Array.from({ length: 4 }, (_, i) => client.generate({ prompt: `a lighthouse at dusk ${i}`, seed: i, deadlineMs: 30_000 })));
    for (const r of replies) {
      expect(r.image.length).toBeGreaterThan(0);
      expect(r.servedBy).not.toBe(BROKEN);
      expect([r.models.light, r.models.heavy]).not.toContain(BROKEN);
    }
  }, 60_000);
});
