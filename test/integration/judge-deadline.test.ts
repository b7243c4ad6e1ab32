/** The judge is not waited for past a request's deadline: a judge that hangs costs the verdict, not the light image. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import type { HadisError } from "../../contracts/errors.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import { decode } from "../../contracts/envelope.ts";
import { JudgeRequestSchema } from "../../contracts/messages.ts";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { configureTelemetry, flushTelemetry, shutdownTelemetry } from "../../services/telemetry/tracing.ts";
import { waitFor } from "../helpers/processes.ts";

const exporter = new InMemorySpanExporter();
let t: TestSystem;
beforeAll(async () => {
  configureTelemetry({ enabled: true, exporters: [exporter], spanSink: false, otlpUrl: null });
  // No discriminator service: a stand-in below takes every judge request and never answers.
  // Workers that judge nothing: every verdict is asked of the judge.
  t = await startTestSystem({ services: ["router", "worker", "resource-manager"], judgeOnWorker: false });
});
afterAll(async () => {
  await t?.stop();
  await shutdownTelemetry();
});

describe("a judge that does not answer", () => {
  it("serves the light image within the request's deadline (the router's judge wait is 10 s)", async () => {
    const failures = async () => Number(/^hadis_judge_failures_total (\S+)$/m.exec(await metricsText())?.[1] ?? 0);
    const before = await failures();
    let asked = 0;
    let answerByMs: number | undefined;
    let askedAt = 0;
    const silent = t.nc.subscribe("hadis.judge", {
      callback: (_err, msg) => {
        asked++;
        askedAt = Date.now();
        answerByMs = decode(JudgeRequestSchema, msg.data, "judge request").answerByMs;
      },
    });
    await t.nc.flush();
    const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
    const started = performance.now();
    const sentAt = Date.now();
    // 3 s: room for the light stage on a busy machine before the judge is asked, far from the judge wait's 10 s.
    const reply = await t.client.generate({ prompt: routes.light, deadlineMs: 3_000 });
    const tookMs = performance.now() - started;
    silent.unsubscribe();
    expect(asked).toBe(1);
    // The request says when the router stops waiting (its deadline, 3 s from its arrival, less
    // the reply margin): a discriminator reaching it later drops it unscored.
    expect(answerByMs).toBeGreaterThan(sentAt + 2_900);
    expect(answerByMs).toBeLessThan(askedAt + 3_000);
    expect(reply.route).toBe("light");
    expect(reply.score).toBeUndefined(); // no verdict came
    expect(reply.fallback).toBe("judge_failed"); // and the reply says so, as does its trace
    const root = () =>
      exporter.getFinishedSpans().find((s) => s.name === "hadis.generate" && s.attributes["hadis.request_id"] === reply.requestId);
    await waitFor(async () => (await flushTelemetry(), root() !== undefined), 5_000, "the request's root span");
    expect(root()!.attributes["hadis.fallback"]).toBe("judge_failed");
    expect(reply.image.length).toBeGreaterThan(0);
    expect(tookMs).toBeGreaterThan(2_800); // it did wait for the judge…
    expect(tookMs).toBeLessThan(6_000); // …not for its 10 s (past the deadline the request would have failed)
    expect((await failures()) - before).toBe(1); // counted: an outage of the judge shows
  }, 20_000);

  it("a retry with the same idempotency key waits for the first attempt no longer than its own deadline", async () => {
    const silent = t.nc.subscribe("hadis.judge", { callback: () => undefined });
    await t.nc.flush();
    const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
    const key = `judge-wait-${Date.now()}`;
    const first = t.client.generate({ prompt: routes.light, deadlineMs: 6_000, idempotencyKey: key });
    await new Promise((r) => setTimeout(r, 200));
    const started = performance.now();
    const retry = await t.client.generate({ prompt: routes.light, deadlineMs: 1_000, idempotencyKey: key }).catch((e: unknown) => e);
    const tookMs = performance.now() - started;
    expect((retry as HadisError).code).toBe("deadline_exceeded");
    expect(tookMs).toBeLessThan(3_500); // not the first attempt's 6 s
    const answer = await first; // the first attempt is not disturbed: light image at its own deadline
    silent.unsubscribe();
    expect(answer.route).toBe("light");
  }, 20_000);
});
