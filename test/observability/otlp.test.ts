import { afterAll, describe, expect, it } from "vitest";
import { createServer } from "node:http";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import {
  configureTelemetry,
  endWithError,
  flushTelemetry,
  RatePicker,
  samplerFromEnv,
  serviceResource,
  ServiceTelemetry,
  shutdownTelemetry,
  SpanKind,
  SpanStatusCode,
  tracingEnabled,
} from "../../services/telemetry/tracing.ts";
import { newHeaders, type MsgHdrs } from "../../services/nats/connection.ts";
import { useNatsServer } from "../helpers/nats.ts";

afterAll(() => shutdownTelemetry());
const nats = useNatsServer("otlp-test");

/** `headers` as a subscriber receives them from a real nats-server (the wire encoding and back). */
async function overTheWire(headers: MsgHdrs): Promise<MsgHdrs> {
  const sub = nats.nc.subscribe("otlp.test.headers", { max: 1 });
  nats.nc.publish("otlp.test.headers", new Uint8Array(0), { headers });
  for await (const m of sub) return m.headers!;
  throw new Error("no message");
}

describe("telemetry configuration", () => {
  it.each([
    { protocol: undefined, contentType: "application/x-protobuf" },
    { protocol: "http/json", contentType: "application/json" },
  ])("posts spans as OTLP/HTTP ($contentType) to OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces", async ({ protocol, contentType }) => {
    const bodies: { path: string; type: string; body: Buffer }[] = [];
    const receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("end", () => {
        bodies.push({ path: req.url ?? "", type: req.headers["content-type"] ?? "", body: Buffer.concat(chunks) });
        res.writeHead(200, { "Content-Type": contentType }).end(contentType === "application/json" ? "{}" : "");
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", () => r()));
    const port = (receiver.address() as { port: number }).port;
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`;
    if (protocol) process.env.OTEL_EXPORTER_OTLP_PROTOCOL = protocol;
    try {
      configureTelemetry();
      expect(tracingEnabled()).toBe(true);
      const telemetry = new ServiceTelemetry("hadis-router", null);
      const span = telemetry.start("hadis.generate", { kind: SpanKind.SERVER, attributes: { "hadis.route": "light" } });
      span.end();
      await flushTelemetry();
      await new Promise((r) => setTimeout(r, 200));
      expect(bodies.map((b) => b.path)).toContain("/v1/traces");
      expect(bodies.map((b) => b.type)).toContain(contentType);
      // Both encodings carry the service name and the span's attribute as UTF-8 text.
      const all = Buffer.concat(bodies.map((b) => b.body)).toString("latin1");
      expect(all).toContain("hadis-router");
      expect(all).toContain("hadis.route");
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
      delete process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
      receiver.close();
    }
  });

  it("is off without configuration, and honours the standard sampler variables", () => {
    configureTelemetry();
    expect(tracingEnabled()).toBe(false);
    process.env.OTEL_TRACES_SAMPLER = "parentbased_traceidratio";
    process.env.OTEL_TRACES_SAMPLER_ARG = "0.25";
    expect(samplerFromEnv().toString()).toMatch(/TraceIdRatioBased\{0.25\}/);
    delete process.env.OTEL_TRACES_SAMPLER;
    delete process.env.OTEL_TRACES_SAMPLER_ARG;
  });

  it("round-trips a traceparent through NATS headers", () => {
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [new InMemorySpanExporter()] });
    const telemetry = new ServiceTelemetry("hadis-worker", null);
    const h = newHeaders();
    h.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    const child = telemetry.start("execute m", {}, telemetry.extract(h));
    expect(child.spanContext().traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    const out = telemetry.inject(child.spanContext());
    expect(out.get("traceparent")).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${child.spanContext().spanId}-01`);
    child.end();
  });

  it("injected headers survive a library's set, the wire encoding, and carry no line a client smuggled in tracestate", async () => {
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null });
    const telemetry = new ServiceTelemetry("hadis-router", null);
    const h = newHeaders();
    h.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    h.set("tracestate", "vendor=x");
    const parent = telemetry.extract(h)!;
    // A client's tracestate reaches us parsed: a member with CR/LF in it is not a member.
    const smuggled = telemetry.extract({ get: (name: string) => (name === "tracestate" ? "k=v\r\nX-Evil: 1,z=w" : h.get(name)) } as never)!;
    for (const ctx of [parent, smuggled]) {
      const out = telemetry.inject(ctx);
      out.set("Nats-Msg-Id", "r1/light/m"); // what JetStream's publish does to them
      const wire = await overTheWire(out);
      expect(wire.get("traceparent")).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`);
      expect(wire.get("Nats-Msg-Id")).toBe("r1/light/m");
      expect(wire.has("X-Evil")).toBe(false);
      expect(wire.get("tracestate")).not.toMatch(/[\r\n]/);
    }
    expect((await overTheWire(telemetry.inject(parent))).get("tracestate")).toBe("vendor=x");
    // Into headers a caller already has: both values set, the caller's kept.
    const own = newHeaders();
    own.set("Content-Type", "application/msgpack");
    telemetry.inject(parent, own);
    expect([own.get("Content-Type"), own.get("traceparent"), own.get("tracestate")]).toEqual([
      "application/msgpack",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "vendor=x",
    ]);
  });

  it("carries tracestate, and an unsampled parent's children record nothing", () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
    const telemetry = new ServiceTelemetry("hadis-worker", null);
    const h = newHeaders();
    h.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    h.set("tracestate", "hadis=d,vendor=x");
    const child = telemetry.start("execute m", {}, telemetry.extract(h));
    expect(child.spanContext().traceState?.get("hadis")).toBe("d");
    expect(telemetry.inject(child.spanContext()).get("tracestate")).toBe("hadis=d,vendor=x");
    child.end();
    const unsampled = newHeaders();
    unsampled.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    const dropped = telemetry.start("execute m", {}, telemetry.extract(unsampled));
    expect(dropped.isRecording()).toBe(false);
    expect(telemetry.inject(dropped.spanContext()).get("traceparent")).toMatch(/-00$/);
    dropped.end();
    // Malformed or all-zero ids are no parent: a new trace starts.
    const bad = newHeaders();
    bad.set("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01");
    expect(telemetry.extract(bad)).toBeUndefined();
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(["execute m"]);
  });
});

describe("sampling and marks", () => {
  it("drops a dashboard mark the caller sent when the router does not pick the request", () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: true, sinkTracesPerSecond: 0, otlpUrl: null, exporters: [exporter] });
    const router = new ServiceTelemetry("hadis-router", null, "r1", "hadis.generate");
    const h = newHeaders();
    h.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    h.set("tracestate", "hadis=d,vendor=x");
    const root = router.start("hadis.generate", { kind: SpanKind.SERVER }, router.extract(h));
    expect(root.spanContext().traceState?.get("hadis")).toBeUndefined();
    expect(root.spanContext().traceState?.get("vendor")).toBe("x");
    root.end();
  });

  it("with the dashboard's sink as the only consumer, only the traces it takes are recorded", () => {
    configureTelemetry({ enabled: true, spanSink: true, sinkTracesPerSecond: 1, otlpUrl: null });
    const router = new ServiceTelemetry("hadis-router", null, "r1", "hadis.generate");
    const worker = new ServiceTelemetry("hadis-worker", null);
    // The bucket holds one token: the first request is picked, the second is not.
    const picked = router.start("hadis.generate", { kind: SpanKind.SERVER });
    const unpicked = router.start("hadis.generate", { kind: SpanKind.SERVER });
    expect(picked.isRecording()).toBe(true);
    expect(unpicked.isRecording()).toBe(false);
    // Only the picked one records downstream (the router sends no trace context for the other).
    expect(worker.start("execute m", {}, worker.extract(worker.inject(picked.spanContext()))).isRecording()).toBe(true);
    expect(worker.start("execute m", {}, worker.extract(worker.inject(unpicked.spanContext()))).isRecording()).toBe(false);
    // With an exporter every sampled span records again.
    configureTelemetry({ enabled: true, spanSink: true, sinkTracesPerSecond: 0, otlpUrl: null, exporters: [new InMemorySpanExporter()] });
    expect(router.start("hadis.generate", { kind: SpanKind.SERVER }).isRecording()).toBe(true);
  });

  it("a new trace linked to sampled spans is sampled even when its root would not be", () => {
    process.env.OTEL_TRACES_SAMPLER = "parentbased_traceidratio";
    process.env.OTEL_TRACES_SAMPLER_ARG = "0";
    try {
      const exporter = new InMemorySpanExporter();
      configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
      const worker = new ServiceTelemetry("hadis-worker", null);
      expect(worker.start("lonely", {}).isRecording()).toBe(false);
      const item = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1, isRemote: true };
      const batch = worker.start("batch m", { links: [{ context: item }] });
      expect(batch.isRecording()).toBe(true);
      batch.end();
      expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(["batch m"]);
    } finally {
      delete process.env.OTEL_TRACES_SAMPLER;
      delete process.env.OTEL_TRACES_SAMPLER_ARG;
    }
  });

  it("an error with a numeric code still gives a string status", () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
    const span = new ServiceTelemetry("hadis-router", null).start("light m", {});
    endWithError(span, Object.assign(new Error("maximum messages exceeded"), { code: 10077 }));
    const [s] = exporter.getFinishedSpans();
    expect(s.status).toEqual({ code: SpanStatusCode.ERROR, message: "10077" });
    expect(s.attributes["hadis.error.code"]).toBe("10077");
  });

  it("times spans on the wall clock, durations on the monotonic one", async () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
    const t = new ServiceTelemetry("hadis-router", null);
    const before = Date.now();
    const own = t.start("own", {});
    const given = t.start("given", { startTime: Date.now() - 50 });
    await new Promise((r) => setTimeout(r, 20));
    own.end();
    given.end();
    const [a, b] = exporter.getFinishedSpans();
    const ms = (h: [number, number]) => h[0] * 1e3 + h[1] / 1e6;
    // (Bounds a mixed-up clock misses by seconds, and a busy machine's pause does not reach.)
    expect(Math.abs(ms(a.startTime) - before)).toBeLessThan(50);
    expect(ms(a.duration)).toBeGreaterThanOrEqual(19);
    expect(ms(a.duration)).toBeLessThan(1_000);
    expect(ms(b.duration)).toBeGreaterThanOrEqual(68);
  });
});

describe("serviceResource", () => {
  it("adds OTEL_RESOURCE_ATTRIBUTES and the SDK's attributes, and keeps the service's own name and instance", () => {
    const saved = { attrs: process.env.OTEL_RESOURCE_ATTRIBUTES, name: process.env.OTEL_SERVICE_NAME };
    try {
      process.env.OTEL_RESOURCE_ATTRIBUTES =
        "deployment.environment=prod,k8s.pod.name=pod%201,service.name=ignored,service.instance.id=ignored";
      process.env.OTEL_SERVICE_NAME = "east";
      const attributes = serviceResource("hadis-worker", "w-03").attributes;
      expect(attributes).toMatchObject({
        "deployment.environment": "prod",
        "k8s.pod.name": "pod 1",
        "service.name": "east.hadis-worker",
        "service.instance.id": "w-03",
        "telemetry.sdk.language": "nodejs",
      });
      delete process.env.OTEL_RESOURCE_ATTRIBUTES;
      delete process.env.OTEL_SERVICE_NAME;
      expect(serviceResource("hadis-router").attributes).not.toHaveProperty("deployment.environment");
      expect(serviceResource("hadis-router").attributes["service.name"]).toBe("hadis-router");
    } finally {
      for (const [key, value] of [
        ["OTEL_RESOURCE_ATTRIBUTES", saved.attrs],
        ["OTEL_SERVICE_NAME", saved.name],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});

describe("spans as exporters read them", () => {
  it("times, parent, attributes, links, status and events", () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
    const telemetry = new ServiceTelemetry("hadis-router", null, "r1");
    const root = telemetry.start("hadis.generate", {
      kind: SpanKind.SERVER,
      attributes: { a: 1, skipped: undefined as unknown as string },
    });
    const child = telemetry.start(
      "queue m",
      { kind: SpanKind.CONSUMER, startTime: 1_700_000_000_250.5, links: [{ context: root.spanContext() }] },
      root.spanContext(),
    );
    child.setAttributes({ b: "x" }).setStatus({ code: SpanStatusCode.ERROR, message: "boom" });
    child.addEvent("retry", { n: 2 });
    child.end(1_700_000_001_000);
    child.setAttribute("late", true); // after end: ignored
    root.end();
    const [c, r] = exporter.getFinishedSpans();
    expect(c.parentSpanContext?.spanId).toBe(r.spanContext().spanId);
    expect(c.spanContext().traceId).toBe(r.spanContext().traceId);
    expect(r.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(c.spanContext().spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(c.startTime).toEqual([1_700_000_000, 250_500_000]);
    expect(c.endTime).toEqual([1_700_000_001, 0]);
    expect(c.duration).toEqual([0, 749_500_000]);
    expect(c.attributes).toEqual({ b: "x" });
    expect(r.attributes).toEqual({ a: 1 });
    expect(c.links[0].context.spanId).toBe(r.spanContext().spanId);
    expect(c.status).toEqual({ code: SpanStatusCode.ERROR, message: "boom" });
    expect(c.events.map((e) => e.name)).toEqual(["retry"]);
    expect(String(r.resource.attributes["service.name"])).toBe("hadis-router");
    expect(r.resource.attributes["service.instance.id"]).toBe("r1");
    expect(r.instrumentationScope.name).toBe("hadis-router");
    expect(r.parentSpanContext).toBeUndefined();
  });

  it("an end before the start is a zero-length span", () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
    const span = new ServiceTelemetry("hadis-worker", null).start("queue m", { startTime: 1_700_000_000_500 });
    span.end(1_700_000_000_000);
    expect(exporter.getFinishedSpans()[0].duration).toEqual([0, 0]);
  });
});

describe("RatePicker (which requests' traces reach the dashboard)", () => {
  it("picks the first event, then at most the rate, refilling with time", () => {
    let now = 0;
    const picker = new RatePicker(2, () => now);
    const burst = Array.from({ length: 10 }, () => picker.pick());
    expect(burst.filter(Boolean)).toHaveLength(2);
    now += 500; // half a second: one more token
    expect([picker.pick(), picker.pick()]).toEqual([true, false]);
    now += 10_000; // the bucket holds one second's worth, no more
    expect(Array.from({ length: 5 }, () => picker.pick()).filter(Boolean)).toHaveLength(2);
  });

  it("below one a second still picks the first, then waits for a whole token", () => {
    let now = 0;
    const picker = new RatePicker(0.5, () => now);
    expect([picker.pick(), picker.pick()]).toEqual([true, false]);
    now += 1_000;
    expect(picker.pick()).toBe(false);
    now += 1_000;
    expect(picker.pick()).toBe(true);
  });

  it("zero picks nothing", () => {
    const picker = new RatePicker(0, () => 0);
    expect(Array.from({ length: 5 }, () => picker.pick()).some(Boolean)).toBe(false);
  });

  it("Infinity picks every event", () => {
    const picker = new RatePicker(Infinity, () => 0);
    expect(Array.from({ length: 100 }, () => picker.pick()).every(Boolean)).toBe(true);
  });
});
