import { afterAll, describe, expect, it } from "vitest";
import { createServer } from "node:http";
import { configureTelemetry, flushTelemetry, samplerFromEnv, ServiceTelemetry, shutdownTelemetry, SpanKind, tracingEnabled } from "../../services/lib/telemetry.ts";
import { newHeaders } from "../../services/lib/nats.ts";

afterAll(() => shutdownTelemetry());

describe("telemetry configuration", () => {
  it("posts spans as OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces", async () => {
    const bodies: { path: string; body: string }[] = [];
    const receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        bodies.push({ path: req.url ?? "", body });
        res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", () => r()));
    const port = (receiver.address() as { port: number }).port;
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`;
    try {
      configureTelemetry();
      expect(tracingEnabled()).toBe(true);
      const telemetry = new ServiceTelemetry("hadis-router", null);
      const span = telemetry.start("hadis.generate", { kind: SpanKind.SERVER, attributes: { "hadis.route": "light" } });
      span.end();
      await flushTelemetry();
      await new Promise((r) => setTimeout(r, 200));
      expect(bodies.map((b) => b.path)).toContain("/v1/traces");
      expect(bodies.map((b) => b.body).join("")).toContain("hadis-router");
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
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
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null });
    const telemetry = new ServiceTelemetry("hadis-worker", null);
    const h = newHeaders();
    h.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    const child = telemetry.start("execute m", {}, telemetry.extract(h));
    expect(child.spanContext().traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    const out = telemetry.inject(telemetry.contextOf(child));
    expect(out.get("traceparent")).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${child.spanContext().spanId}-01`);
    child.end();
  });
});
