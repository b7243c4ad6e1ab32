import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { waitFor } from "../helpers/processes.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { newHeaders } from "../../services/nats/connection.ts";
import { readGenerateReply } from "../../services/client/client.ts";
import { encode, parseRaw } from "../../contracts/envelope.ts";
import { SpanStatusCode } from "@opentelemetry/api";
import { tickObserver } from "../../services/resource-manager/observe.ts";
import {
  configureTelemetry,
  flushTelemetry,
  shutdownTelemetry,
  spanSinkCount,
  spanSinkSubject,
  type SpanRecord,
} from "../../services/telemetry/tracing.ts";

const exporter = new InMemorySpanExporter();
let t: TestSystem;
beforeAll(async () => {
  configureTelemetry({ enabled: true, exporters: [exporter], spanSink: false, otlpUrl: null });
  // The static policy keeps the (light, heavy) pair the prompts below were chosen for.
  t = await startTestSystem({ policy: "static", judgeOnWorker: false });
});
afterAll(async () => {
  await t?.stop();
  await shutdownTelemetry();
});

const serviceOf = (s: ReadableSpan) => String(s.resource.attributes["service.name"]);

async function traceOf(traceId: string, until: (spans: ReadableSpan[]) => boolean): Promise<ReadableSpan[]> {
  let spans: ReadableSpan[] = [];
  await waitFor(
    async () => {
      await flushTelemetry();
      spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      return until(spans);
    },
    5_000,
    `spans of trace ${traceId}`,
  );
  return spans;
}

describe("one trace per request across router, worker and discriminator", () => {
  const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

  it("a light->heavy request continues the caller's traceparent, with correct parent links", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const callerSpanId = "00f067aa0ba902b7";
    const h = newHeaders();
    h.set("traceparent", `00-${traceId}-${callerSpanId}-01`);
    const msg = await t.nc.request("hadis.generate", encode({ prompt: routes.escalated, deadlineMs: 20_000 }), {
      timeout: 20_000,
      headers: h,
    });
    const reply = readGenerateReply(msg);
    expect(reply.route).toBe("light->heavy");

    const spans = await traceOf(
      traceId,
      (s) => s.some((x) => x.name === "hadis.generate") && s.filter((x) => x.name.startsWith("execute")).length >= 2,
    );
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const root = spans.find((s) => s.name === "hadis.generate")!;
    expect(root.parentSpanContext?.spanId).toBe(callerSpanId);
    expect(serviceOf(root)).toBe("hadis-router");
    expect(new Set(spans.map(serviceOf))).toEqual(new Set(["hadis-router", "hadis-worker", "hadis-discriminator"]));
    // Every span but the root has its parent inside the trace, and starts no earlier than it (one
    // host, one clock: a queue span that began before its stage would draw a bar out of place).
    const startMs = (s: ReadableSpan) => s.startTime[0] * 1e3 + s.startTime[1] / 1e6;
    for (const s of spans) {
      if (s === root) continue;
      expect(byId.has(s.parentSpanContext!.spanId), `${s.name} has its parent in the trace`).toBe(true);
      expect(startMs(s), `${s.name} starts within its parent`).toBeGreaterThanOrEqual(startMs(byId.get(s.parentSpanContext!.spanId)!));
    }
    const parentName = (s: ReadableSpan) => byId.get(s.parentSpanContext!.spanId)?.name;
    const named = (n: string) => spans.filter((s) => s.name === n);
    const light = named(`light ${DEFAULT_STATIC.light}`)[0];
    const heavy = named(`heavy ${DEFAULT_STATIC.heavy}`)[0];
    expect(parentName(named("route")[0])).toBe("hadis.generate");
    expect(parentName(light)).toBe("hadis.generate");
    expect(parentName(heavy)).toBe("hadis.generate");
    expect(parentName(named(`queue ${DEFAULT_STATIC.light}`)[0])).toBe(light.name);
    expect(parentName(named(`execute ${DEFAULT_STATIC.light}`)[0])).toBe(light.name);
    expect(parentName(named(`execute ${DEFAULT_STATIC.heavy}`)[0])).toBe(heavy.name);
    const judgeServer = named("judge").find((s) => serviceOf(s) === "hadis-discriminator")!;
    expect(parentName(judgeServer)).toBe("hadis.generate");
    expect(judgeServer.attributes["hadis.disc.accept"]).toBe(false);
    expect(named("reply")).toHaveLength(1);

    // The attributes an operator reads.
    expect(root.attributes["hadis.route"]).toBe("light->heavy");
    expect(root.attributes["hadis.models"]).toEqual([DEFAULT_STATIC.light, DEFAULT_STATIC.heavy]);
    expect(root.attributes["hadis.plan_epoch"]).toBe(reply.planEpoch);
    // The test runs at time scale 0.001: a 60 ms SLO, which a cold first request may miss.
    expect(root.attributes["hadis.slo_ms"]).toBe(t.system.routers[0].plans.current!.sloMs);
    expect(root.attributes["hadis.slo_met"]).toBe(reply.timings.totalMs <= Number(root.attributes["hadis.slo_ms"]));
    expect(root.attributes["hadis.deadline_ms"]).toBe(20_000);
    expect(root.attributes["hadis.disc.score"]).toBe(reply.score);
    expect(root.attributes["hadis.disc.threshold"]).toBe(reply.threshold);
    const exec = named(`execute ${DEFAULT_STATIC.light}`)[0];
    expect(exec.attributes["hadis.batch_size"]).toBeGreaterThanOrEqual(1);
    // The worker's batch span (its own trace) links to the item's stage span; the execute span links to the batch.
    const batch = exporter
      .getFinishedSpans()
      .find((s) => s.name === `batch ${DEFAULT_STATIC.light}` && s.links.some((l) => l.context.traceId === traceId));
    expect(batch).toBeDefined();
    expect(batch!.links.some((l) => l.context.spanId === light.spanContext().spanId)).toBe(true);
    expect(exec.links.map((l) => l.context.spanId)).toEqual([batch!.spanContext().spanId]);
  });

  it("the discriminator starts no trace of its own for a traceparent it cannot read", async () => {
    const plan = t.system.routers[0].plans.current!;
    const judged = () => exporter.getFinishedSpans().filter((s) => s.name === "judge" && serviceOf(s) === "hadis-discriminator");
    await flushTelemetry();
    const before = judged().length;
    const ask = async (traceparent: string) => {
      const h = newHeaders();
      h.set("traceparent", traceparent);
      const body = {
        v: 1,
        requestId: "r-judge",
        prompt: "a cat",
        model: plan.pair.light,
        image: new Uint8Array([137, 80, 78, 71]),
        planEpoch: plan.epoch,
      };
      await t.nc.request("hadis.judge", encode(body), { timeout: 5_000, headers: h });
    };
    await ask("00-not-a-trace-01");
    await ask("00-00000000000000000000000000000000-00f067aa0ba902b7-01"); // an all-zero trace id is invalid
    await ask("00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01"); // a valid one is continued
    await flushTelemetry();
    const spans = judged().slice(before);
    expect(spans).toHaveLength(1);
    expect(spans[0].spanContext().traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4737");
  });

  it("continues a caller's trace whose header name is in another case (`Traceparent`, as a client canonicalizing names sends it)", async () => {
    const traceId = "5bf92f3577b34da6a3ce929d0e0e4737";
    const h = newHeaders();
    h.set("Traceparent", `00-${traceId}-00f067aa0ba902b8-01`);
    await t.nc.request("hadis.generate", encode({ prompt: routes.light, deadlineMs: 20_000 }), { timeout: 20_000, headers: h });
    const spans = await traceOf(traceId, (s) => s.some((x) => x.name === "hadis.generate"));
    expect(spans.find((s) => s.name === "hadis.generate")!.parentSpanContext?.spanId).toBe("00f067aa0ba902b8");
  });

  it("a request without traceparent starts its own trace", async () => {
    const reply = await t.client.generate({ prompt: routes.heavy, deadlineMs: 20_000 });
    await waitFor(
      async () => {
        await flushTelemetry();
        return exporter.getFinishedSpans().some((s) => s.name === "hadis.generate" && s.attributes["hadis.request_id"] === reply.requestId);
      },
      5_000,
      "root span",
    );
    const root = exporter
      .getFinishedSpans()
      .find((s) => s.name === "hadis.generate" && s.attributes["hadis.request_id"] === reply.requestId)!;
    expect(root.parentSpanContext).toBeUndefined();
    expect(root.attributes["hadis.route"]).toBe("heavy");
  });
});

describe("the resource manager's ticks", () => {
  it("are spans with what the tick saw and chose; a failed tick is an error span of its duration", async () => {
    const outcome = await t.system.manager!.tick();
    expect(outcome).not.toBeNull();
    const ticks = () => exporter.getFinishedSpans().filter((s) => s.name === "tick" && serviceOf(s) === "hadis-resource-manager");
    await waitFor(async () => (await flushTelemetry(), ticks().length > 0), 5_000, "a tick span");
    const tick = ticks().at(-1)!;
    expect(tick.attributes["hadis.workers"]).toBe(outcome!.snapshot.workers.length);
    expect(tick.attributes["hadis.plan_epoch"]).toBe(t.system.manager!.plans.current!.epoch);
    expect(tick.attributes["hadis.pair"]).toBe(`${DEFAULT_STATIC.light}→${DEFAULT_STATIC.heavy}`);
    expect(tick.status.code).toBe(SpanStatusCode.UNSET);

    tickObserver(t.nc)(null, new Error("solver gone"), 40);
    await flushTelemetry();
    const failed = ticks().at(-1)!;
    expect(failed.status).toEqual({ code: SpanStatusCode.ERROR, message: "solver gone" });
    expect(failed.attributes["error.message"]).toBe("solver gone");
    const ms = (failed.endTime[0] - failed.startTime[0]) * 1e3 + (failed.endTime[1] - failed.startTime[1]) / 1e6;
    expect(ms).toBeGreaterThanOrEqual(39);
  });
});

describe("the dashboard's span sink", () => {
  it("carries whole traces of at most the configured requests a second; exporters still get every span", async () => {
    const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
    // A fresh exporter: reconfiguring shuts the previous one down.
    const all = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, exporters: [all], spanSink: true, sinkTracesPerSecond: 2, otlpUrl: null });
    const records: SpanRecord[] = [];
    const sub = t.nc.subscribe(spanSinkSubject(), { callback: (_e, m) => void records.push(...(parseRaw(m.data) as SpanRecord[])) });
    try {
      const started = Date.now();
      const replies = await Promise.all(
        Array.from({ length: 12 }, (_, i) => t.client.generate({ prompt: routes.escalated, seed: i, deadlineMs: 20_000 })),
      );
      const elapsedS = (Date.now() - started) / 1000;
      expect(replies.every((r) => r.route === "light->heavy")).toBe(true);
      const ids = new Set(replies.map((r) => r.requestId));
      const exportedRoots = () =>
        all.getFinishedSpans().filter((s) => s.name === "hadis.generate" && ids.has(String(s.attributes["hadis.request_id"])));
      await waitFor(async () => (await flushTelemetry(), exportedRoots().length === 12), 5_000, "every root exported");
      // The sinks publish every 100 ms, each service on its own: wait until what reached the sink is
      // whole (a root for every trace, each from three services), then check it (a bounded wait).
      const requestTraces = new Set(exportedRoots().map((s) => s.spanContext().traceId));
      const whole = () => {
        const rooted = new Set(records.filter((r) => r.n === "hadis.generate").map((r) => r.t));
        const sunkNow = new Set(records.map((r) => r.t).filter((id) => requestTraces.has(id)));
        return (
          sunkNow.size > 0 &&
          [...sunkNow].every((id) => rooted.has(id) && new Set(records.filter((r) => r.t === id).map((r) => r.sv)).size === 3)
        );
      };
      await waitFor(whole, 5_000, "whole traces at the sink").catch(() => undefined);
      const roots = records.filter((r) => r.n === "hadis.generate" && ids.has(String(r.a["hadis.request_id"])));
      // A bucket of 2 tokens, refilled at 2 a second while the requests ran.
      expect(roots.length).toBeGreaterThanOrEqual(1);
      expect(roots.length).toBeLessThanOrEqual(2 + Math.ceil(elapsedS * 2));
      const marked = new Set(roots.map((r) => r.t));
      for (const traceId of marked) {
        const services = new Set(records.filter((r) => r.t === traceId).map((r) => r.sv));
        expect(services).toEqual(new Set(["hadis-router", "hadis-worker", "hadis-discriminator"]));
      }
      // Nothing of the unmarked requests' traces reaches the sink.
      const sunk = new Set(records.map((r) => r.t).filter((id) => requestTraces.has(id)));
      expect(sunk).toEqual(marked);
    } finally {
      sub.unsubscribe();
      configureTelemetry({ enabled: true, exporters: [new InMemorySpanExporter()], spanSink: false, otlpUrl: null });
    }
  });
});

describe("a stopped system's tracing", () => {
  it("leaves no span sink behind (each held its connection and buffered spans for as long as the process ran)", async () => {
    const before = spanSinkCount();
    const other = await startTestSystem({ policy: "static", judgeOnWorker: false });
    try {
      const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
      await other.client.generate({ prompt: routes.escalated, deadlineMs: 20_000 });
      expect(spanSinkCount()).toBeGreaterThan(before); // router, worker and discriminator traced it
    } finally {
      await other.stop();
    }
    expect(spanSinkCount()).toBe(before);
  }, 40_000);
});
