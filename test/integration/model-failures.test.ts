/**
 * Pool models whose exports are broken, live: the whole system (router, real HiGHS resource
 * manager, CLIP judge, four onnx workers on tiny generated models) where `sd35-large`, the heavy
 * model the planner picks at zero demand, maps to a broken folder. One export misses its UNet, so
 * its loads fail; the other loads, and every batch fails (its VAE decoder makes 4-channel
 * images). Either way the manager takes the model out of the pool, plans every worker on the
 * other models, and requests are answered by them; none is lost meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mapWithBrokenExport, type Breakage } from "../helpers/tiny-models.ts";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import type { Logger } from "../../services/telemetry/log.ts";
import { decode } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import { WorkerHeartbeatSchema, type WorkerHeartbeat } from "../../contracts/messages.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";

const BROKEN = "sd35-large";

async function until(check: () => boolean, ms = 30_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Requests the light model made after the heavy one failed them, so far (this process's routers). */
async function lightFallbacks(): Promise<number> {
  return [...(await metricsText()).matchAll(/^hadis_light_fallbacks_total\{sent_by="(\w+)"\} (\d+)$/gm)].reduce(
    (n, m) => n + Number(m[2]),
    0,
  );
}

/** A system (and its own nats-server) whose `BROKEN` model maps to an export broken as `breakage` says, for one describe block. */
function brokenSystem(breakage: Breakage, warmUp = true) {
  const ctx = {
    server: undefined as unknown as LocalServer,
    system: undefined as unknown as RunningSystem,
    nc: undefined as unknown as NatsConnection,
    client: undefined as unknown as HadisClient,
    events: [] as { event: string; fields: Record<string, unknown> }[],
    /** Heartbeats naming a failed model, in arrival order. */
    failures: [] as WorkerHeartbeat[],
    startedAt: 0,
  };
  const modelsDir = mkdtempSync(join(tmpdir(), "hadis-broken-"));
  /** A log that keeps the manager's events (and drops the rest). */
  const keep = (event: string, fields: Record<string, unknown> = {}) =>
    void (event.startsWith("manager.") && ctx.events.push({ event, fields }));
  const log: Logger = { debug: () => undefined, info: keep, warn: keep, error: keep };

  beforeAll(async () => {
    const modelMap = mapWithBrokenExport(modelsDir, "sdxl", (models) => (models[BROKEN] = { ...models[BROKEN], dir: "broken" }), breakage);
    ctx.server = await startNatsServer();
    ctx.nc = await connectNats(ctx.server.url, "test");
    ctx.nc.subscribe("hadis.heartbeat.worker.*", {
      callback: (_e, m) => {
        const beat = decode(WorkerHeartbeatSchema, m.data, "heartbeat");
        if (beat.failedModel) ctx.failures.push(beat);
      },
    });
    ctx.startedAt = Date.now();
    ctx.system = await startSystem({
      natsUrl: ctx.server.url,
      workers: 4,
      workerIdPrefix: "gpu",
      backend: "onnx",
      onnx: { modelsDir, modelMap, warmUp },
      // HADIS's analyzer routes the hard prompts below to the heavy (broken) model; the default
      // policy's learned router sends them to the light one, whose images the judge accepts, and
      // the broken model would see no batch to fail.
      policy: "hadis",
      tickMs: 1_000,
      workQueue: { storage: "memory" },
      log,
    });
    ctx.client = new HadisClient(ctx.nc);
  }, 90_000);

  afterAll(async () => {
    await ctx.nc?.close();
    await ctx.system?.stop(2_000);
    await ctx.server?.stop();
    rmSync(modelsDir, { recursive: true, force: true });
  });
  return ctx;
}

/** What every test here checks once the plan has left `BROKEN` out: the workers serve the rest, and requests are answered by them. */
async function checkPlannedWithout(ctx: ReturnType<typeof brokenSystem>, failedWorkers: number) {
  const plan = ctx.system.manager!.plans.current!;
  expect(plan.models[BROKEN]?.workers ?? 0).toBe(0);
  expect([plan.pair.light, plan.pair.heavy]).not.toContain(BROKEN);
  // The workers that failed were not benched: the model is broken, not they.
  expect(Object.keys(plan.assignment).sort()).toEqual(["gpu-00", "gpu-01", "gpu-02", "gpu-03"]);
  expect(failedWorkers).toBeGreaterThanOrEqual(2);
  expect(ctx.events.find((e) => e.event === "manager.model_unavailable")?.fields).toEqual({ model: BROKEN });
  // Operators see it in the metrics (an alert on hadis_model_unavailable > 0).
  await ctx.system.manager!.tick();
  const metrics = await metricsText();
  expect(metrics).toContain(`hadis_model_unavailable{model="${BROKEN}"} 1`);
  expect(metrics).toContain(`hadis_model_unavailable{model="sd35-medium"} 0`);
  expect(metrics).toMatch(/^hadis_workers_benched 0$/m);

  await until(() => ctx.system.workers!.agents.every((a) => a.status("x").state === "serving"));
  const replies = await Promise.all(
    Array.from({ length: 4 }, (_, i) => ctx.client.generate({ prompt: `a lighthouse at dusk ${i}`, seed: i, deadlineMs: 30_000 })),
  );
  for (const r of replies) {
    expect(r.image.length).toBeGreaterThan(0);
    expect(r.servedBy).not.toBe(BROKEN);
    expect([r.models.light, r.models.heavy]).not.toContain(BROKEN);
  }
}

const failedWorkersOf = (beats: WorkerHeartbeat[], loaded: boolean) =>
  new Set(beats.filter((b) => b.failedModel === BROKEN && (b.model === BROKEN) === loaded).map((b) => b.workerId)).size;

describe("a pool model that will not load", () => {
  const ctx = brokenSystem("no-unet");
  it("is taken out of the pool after failing on two workers; every worker serves the others and requests are answered", async () => {
    const plans = ctx.system.manager!.plans;
    await until(() => (plans.current?.reason ?? "").includes(`without ${BROKEN} (failing on workers)`));
    const failed = failedWorkersOf(ctx.failures, false);
    console.log(
      `model-failures (load): plan epoch ${plans.current!.epoch} without ${BROKEN} ${Date.now() - ctx.startedAt} ms after the system started; ${failed} workers had reported its failed load`,
    );
    await checkPlannedWithout(ctx, failed);
  }, 60_000);
});

describe("a pool model that loads and fails every batch", () => {
  // Without the warm-up run after each load (which would fail such a load).
  const ctx = brokenSystem("vae-4-channels", false);
  it("is taken out of the pool once its batches failed three times in a row on two workers; every request gets an image", async () => {
    const plans = ctx.system.manager!.plans;
    await until(
      () => (plans.current?.models[BROKEN]?.workers ?? 0) > 0 && ctx.system.workers!.agents.some((a) => a.status("x").model === BROKEN),
    );
    // Traffic, some of it for the broken model, until the plan leaves it out.
    const fallbacksBefore = await lightFallbacks();
    const outcomes: string[] = [];
    const sent: Promise<void>[] = [];
    for (let i = 0; !(plans.current?.reason ?? "").includes(`without ${BROKEN} (failing on workers)`); i++) {
      if (Date.now() - ctx.startedAt > 60_000) throw new Error(`the plan still uses ${BROKEN}; outcomes so far: ${outcomes.join(", ")}`);
      sent.push(
        ctx.client
          .generate({
            prompt: `an intricate baroque cathedral interior with stained glass, crowds and candles ${i}`,
            seed: i,
            deadlineMs: 30_000,
          })
          .then(
            (r) => void outcomes.push(`${r.route} by ${r.servedBy}${r.fallback ? ` (${r.fallback})` : ""}`),
            (err) => void outcomes.push(err instanceof HadisError ? err.code : `untyped: ${(err as Error).message}`),
          ),
      );
      await new Promise((r) => setTimeout(r, 1_500));
    }
    const failed = failedWorkersOf(ctx.failures, true);
    console.log(
      `model-failures (batches): plan epoch ${plans.current!.epoch} without ${BROKEN} ${Date.now() - ctx.startedAt} ms after the system started; ${failed} workers had reported its batches failing`,
    );
    await Promise.all(sent);
    const counts = outcomes.reduce<Record<string, number>>((acc, o) => ((acc[o] = (acc[o] ?? 0) + 1), acc), {});
    console.log(`model-failures (batches): ${sent.length} requests sent meanwhile: ${JSON.stringify(counts)}`);
    // Every request was answered with an image, never the broken model's: those its batches
    // failed were made by the light model.
    expect(outcomes).toHaveLength(sent.length);
    for (const o of outcomes) expect(o).toMatch(/^(light|heavy|light->heavy) by (?!sd35-large( |$))/);
    const fallbacks = (await lightFallbacks()) - fallbacksBefore;
    console.log(`model-failures (batches): ${fallbacks} requests served by the light model after the heavy one failed them`);
    expect(fallbacks).toBeGreaterThan(0);
    // Each reply made by the light model after the heavy one failed it says so.
    expect(outcomes.filter((o) => /\((heavy_failed|heavy_late)\)$/.test(o))).toHaveLength(fallbacks);
    await checkPlannedWithout(ctx, failed);
  }, 90_000);
});
