/**
 * Judging where the image is, against a real nats-server: workers that hold a judge send the
 * verdict with the light image and the discriminator is asked nothing; workers that hold none
 * send none, and the router asks the discriminator as before.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { startTestServices, startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { configureTelemetry, flushTelemetry, shutdownTelemetry } from "../../services/telemetry/tracing.ts";
import type { RunningSystem } from "../../services/system.ts";
import type { NatsConnection } from "../../services/nats/connection.ts";
import { waitFor } from "../helpers/processes.ts";

const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
const exporter = new InMemorySpanExporter();

beforeAll(() => {
  configureTelemetry({ enabled: true, exporters: [exporter], spanSink: false, otlpUrl: null });
});
afterAll(async () => {
  await shutdownTelemetry();
});

/** Counts the judge requests published (a plain subscription sees each besides the discriminator's queue group). */
async function countJudgeRequests(nc: NatsConnection) {
  let asked = 0;
  const sub = nc.subscribe("hadis.judge", { callback: () => void asked++ });
  await nc.flush();
  return { asked: () => asked, stop: () => sub.unsubscribe() };
}

describe("workers that hold a judge (the profile backend's default)", () => {
  let t: TestSystem;
  beforeAll(async () => {
    t = await startTestSystem({ timeScale: 0.01 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("serve light requests with the worker's verdict, accepted or escalated, and the discriminator receives no judge request", async () => {
    const judge = await countJudgeRequests(t.nc);
    const accepted = await Promise.all([1, 2, 3].map((seed) => t.client.generate({ prompt: routes.light, seed })));
    const escalated = await t.client.generate({ prompt: routes.escalated });
    judge.stop();
    expect(judge.asked()).toBe(0);
    for (const reply of accepted) {
      expect(reply.route).toBe("light");
      expect(reply.fallback).toBeUndefined();
      expect(reply.score).toBeGreaterThanOrEqual(reply.threshold!);
      // (The judge stage's time is checked on a simulated clock in test/actors/worker-verdict.test.ts:
      // here the profile judge's 15 ms × 0.01 reads as 0 or 1 whole ms.)
    }
    expect(escalated.route).toBe("light->heavy");
    expect(escalated.score).toBeLessThan(escalated.threshold!);

    // The judge span is still there, the worker's, under the light stage's span.
    const judgeSpan = () =>
      exporter
        .getFinishedSpans()
        .find(
          (s) =>
            s.name === "judge" && s.attributes["hadis.request_id"] === escalated.requestId && s.attributes["hadis.judged_on"] === "worker",
        );
    await waitFor(async () => (await flushTelemetry(), judgeSpan() !== undefined), 5_000, "the worker's judge span");
    expect(judgeSpan()!.attributes["hadis.disc.accept"]).toBe(false);
  }, 30_000);
});

describe("workers that hold no judge", () => {
  let t: TestSystem;
  let workers: RunningSystem | undefined;
  beforeAll(async () => {
    // Routers ask for verdicts (their default); the only workers cannot judge (as onnx workers without a judge, or older ones).
    t = await startTestSystem({ timeScale: 0.01, services: ["router", "resource-manager", "discriminator"] });
    workers = await startTestServices(t.server.url, { timeScale: 0.01, services: ["worker"], judgeOnWorker: false });
  });
  afterAll(async () => {
    await workers?.stop(2_000);
    await t?.stop();
  });

  it("send no verdict, and the router asks the discriminator for each light image", async () => {
    const judge = await countJudgeRequests(t.nc);
    const accepted = await t.client.generate({ prompt: routes.light });
    const escalated = await t.client.generate({ prompt: routes.escalated });
    judge.stop();
    expect(judge.asked()).toBe(2);
    expect(accepted.route).toBe("light");
    expect(accepted.score).toBeGreaterThanOrEqual(accepted.threshold!);
    expect(escalated.route).toBe("light->heavy");
  }, 30_000);
});
