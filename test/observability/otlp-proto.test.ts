import { describe, expect, it } from "vitest";
import { createRequire } from "node:module";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { createTraceState, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { configureTelemetry, ServiceTelemetry, SpanKind, SpanStatusCode } from "../../services/lib/telemetry.ts";
import { encodeTraceRequest } from "../../services/lib/otlp-proto.ts";

// The OTLP schema as the OpenTelemetry library compiled it (protobufjs), to decode both encodings.
const root = createRequire(import.meta.url)("@opentelemetry/otlp-transformer/build/src/generated/root.js");
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const decoded = (bytes: Uint8Array) => Request.toObject(Request.decode(bytes), { longs: String, bytes: String, defaults: true });

describe("OTLP protobuf encoding straight from the spans", () => {
  it("decodes to exactly what the OpenTelemetry serializer writes, for our spans and the SDK's", () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
    const router = new ServiceTelemetry("hadis-router", null, "r1");
    const worker = new ServiceTelemetry("hadis-worker", null);
    const remote = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 1, isRemote: true, traceState: createTraceState("hadis=d,x=y") };
    const rootSpan = router.start("hadis.generate", {
      kind: SpanKind.SERVER,
      attributes: { s: "ünïcode ✓", b: true, i: 42, neg: -7, big: 2 ** 40, d: 0.125, arr: ["a", "b"], nums: [1, 2.5], empty: "" },
    }, remote);
    const child = worker.start("execute m", { kind: SpanKind.CONSUMER, links: [{ context: rootSpan.spanContext(), attributes: { "hadis.link": "batch" } }] }, rootSpan.spanContext());
    child.addEvent("retry", { n: 2 });
    child.setStatus({ code: SpanStatusCode.ERROR, message: "boom" });
    child.end();
    rootSpan.setStatus({ code: SpanStatusCode.OK });
    rootSpan.end();
    // An SDK span too: the encoder takes any ReadableSpan.
    const sdk = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ "service.name": "sdk" }), spanProcessors: [new SimpleSpanProcessor(sdk)] });
    const s = provider.getTracer("sdk-scope", "1.2.3").startSpan("sdk span", { attributes: { k: "v" } }, trace.setSpanContext(ROOT_CONTEXT, remote));
    s.end();
    const spans = [...exporter.getFinishedSpans(), ...sdk.getFinishedSpans()];
    expect(spans).toHaveLength(3);

    const ours = decoded(encodeTraceRequest(spans));
    const theirs = decoded(ProtobufTraceSerializer.serializeRequest(spans)!);
    expect(ours).toEqual(theirs);
    // And what it says is right, not only the same.
    expect(ours.resourceSpans).toHaveLength(3);
    const all = ours.resourceSpans.flatMap((r: { scopeSpans: { spans: unknown[] }[] }) => r.scopeSpans.flatMap((x) => x.spans));
    const routerSpan = all.find((x: { name: string }) => x.name === "hadis.generate");
    expect(Buffer.from(routerSpan.traceId, "base64").toString("hex")).toBe(remote.traceId);
    expect(routerSpan.traceState).toBe("hadis=d,x=y");
    expect(routerSpan.kind).toBe(2); // SERVER
    expect(routerSpan.flags).toBe(0x301); // sampled, has-is-remote, remote parent
    expect(routerSpan.attributes.find((a: { key: string }) => a.key === "neg").value.intValue).toBe("-7");
    expect(routerSpan.attributes.find((a: { key: string }) => a.key === "big").value.intValue).toBe(String(2 ** 40));
  });

  it("grows its buffer for large batches and long strings", () => {
    const exporter = new InMemorySpanExporter();
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
    const t = new ServiceTelemetry("hadis-router", null);
    for (let i = 0; i < 300; i++) t.start(`span ${i}`, { attributes: { long: "x".repeat(i * 37) } }).end();
    const spans = exporter.getFinishedSpans();
    expect(decoded(encodeTraceRequest(spans))).toEqual(decoded(ProtobufTraceSerializer.serializeRequest(spans)!));
  });
});
