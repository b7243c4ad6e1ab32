import { describe, expect, it } from "vitest";
import { createRequire } from "node:module";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { createTraceState, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { configureTelemetry, ServiceTelemetry, SpanKind, SpanStatusCode } from "../../services/lib/telemetry.ts";
import { encodeTraceRequest } from "../../services/lib/otlp-proto.ts";
import { OtlpStreamProcessor } from "../../services/lib/otlp-export.ts";

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
    // Again, now from the encoder's caches of names and attribute values.
    expect(decoded(encodeTraceRequest(spans))).toEqual(theirs);
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
    // Past the per-key cache of values: encoded each time from then on.
    for (let i = 0; i < 300; i++) t.start(`span ${i}`, { attributes: { long: "x".repeat(i * 37), small: i % 40, flag: i % 2 === 0 } }).end();
    const spans = exporter.getFinishedSpans();
    expect(decoded(encodeTraceRequest(spans))).toEqual(decoded(ProtobufTraceSerializer.serializeRequest(spans)!));
  });
});

describe("OtlpStreamProcessor", () => {
  /** A transport that records each request and completes it only when told. */
  function heldTransport() {
    const sent: { bytes: Uint8Array; done: (r: ExportResult) => void }[] = [];
    return { sent, export: (bytes: Uint8Array, done: (r: ExportResult) => void) => void sent.push({ bytes, done }), shutdown: async () => undefined };
  }
  const spanCount = (bytes: Uint8Array) => decoded(bytes).resourceSpans.flatMap((r: { scopeSpans: { spans: unknown[] }[] }) => r.scopeSpans.flatMap((x) => x.spans)).length;

  it("sends batches of the configured size, one at a time, and drops what the queue cannot hold", async () => {
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [new InMemorySpanExporter()] });
    const router = new ServiceTelemetry("hadis-router", null);
    const worker = new ServiceTelemetry("hadis-worker", null);
    const transport = heldTransport();
    const processor = new OtlpStreamProcessor(transport, { maxQueueSize: 10, maxExportBatchSize: 4, scheduledDelayMillis: 60_000 });
    const ended: ReadableSpan[] = [];
    const end = (t: ServiceTelemetry, name: string) => {
      const span = t.start(name, { attributes: { "hadis.model": "m" } });
      span.end();
      ended.push(span as unknown as ReadableSpan);
      processor.onEnd(span as unknown as ReadableSpan);
    };
    for (let i = 0; i < 4; i++) end(i % 2 ? worker : router, `s${i}`);
    // Four spans: the first batch goes out at once, the same request the OpenTelemetry serializer writes.
    expect(transport.sent).toHaveLength(1);
    expect(decoded(transport.sent[0].bytes)).toEqual(decoded(ProtobufTraceSerializer.serializeRequest(ended.slice(0, 4))!));
    // While it is in flight the next batch waits; past 10 held spans the rest are dropped.
    for (let i = 4; i < 14; i++) end(router, `s${i}`);
    expect(transport.sent).toHaveLength(1);
    expect(processor.dropped).toBe(4);
    transport.sent[0].done({ code: ExportResultCode.SUCCESS });
    await Promise.resolve(); // the next batch goes out after the callback returns
    expect(transport.sent).toHaveLength(2);
    expect(spanCount(transport.sent[1].bytes)).toBe(4);
    transport.sent[1].done({ code: ExportResultCode.FAILED });
    expect(processor.failed).toBe(4);
    // A flush sends what is left (less than a batch) and waits for it.
    const flushed = processor.forceFlush();
    await Promise.resolve();
    expect(transport.sent).toHaveLength(3);
    expect(spanCount(transport.sent[2].bytes)).toBe(2);
    transport.sent[2].done({ code: ExportResultCode.SUCCESS });
    await flushed;
  });

  it("survives a transport that answers at once or throws, and a span it cannot encode", async () => {
    const t = new ServiceTelemetry("hadis-router", null);
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [new InMemorySpanExporter()] });
    const sent: Uint8Array[] = [];
    let throwNext = false;
    const transport = {
      export: (bytes: Uint8Array, done: (r: ExportResult) => void) => {
        if (throwNext) throw new Error("socket gone");
        sent.push(bytes);
        done({ code: ExportResultCode.SUCCESS });
      },
      shutdown: async () => undefined,
    };
    const losses: [string, number][] = [];
    const processor = new OtlpStreamProcessor(transport, { maxQueueSize: 8, maxExportBatchSize: 2, scheduledDelayMillis: 60_000, onLoss: (why, n) => void losses.push([why, n]) });
    const end = (name: string, startTime?: Date) => {
      const span = t.start(name, startTime === undefined ? {} : { startTime });
      span.end();
      processor.onEnd(span as unknown as ReadableSpan);
    };
    for (let i = 0; i < 6; i++) end(`s${i}`);
    await processor.forceFlush();
    expect(sent.map(spanCount)).toEqual([2, 2, 2]);
    throwNext = true;
    end("a");
    end("b");
    await processor.forceFlush();
    expect(processor.failed).toBe(2);
    throwNext = false;
    // A time before 1970 cannot be written as fixed64: that span is dropped, the next ones encode whole.
    end("bad", new Date(-5_000));
    end("c");
    end("d");
    await processor.forceFlush();
    expect(processor.dropped).toBe(1);
    expect(decoded(sent.at(-1)!).resourceSpans[0].scopeSpans[0].spans.map((x: { name: string }) => x.name)).toEqual(["c", "d"]);
    // Every loss is told, with why: the service counts them in hadis_trace_spans_lost_total.
    expect(losses).toEqual([["export_failed", 2], ["unencodable", 1]]);
  });

  it("a flush sends every waiting batch when the transport answers at once", async () => {
    const sent: number[] = [];
    let held: ((r: ExportResult) => void) | null = null;
    let holdNext = true;
    const transport = {
      export: (bytes: Uint8Array, done: (r: ExportResult) => void) => {
        sent.push(spanCount(bytes));
        if (holdNext) held = done;
        else done({ code: ExportResultCode.SUCCESS });
      },
      shutdown: async () => undefined,
    };
    const processor = new OtlpStreamProcessor(transport, { maxQueueSize: 100, maxExportBatchSize: 1, scheduledDelayMillis: 60_000 });
    const tracer = new BasicTracerProvider({ spanProcessors: [processor] }).getTracer("t");
    // The first export is in flight; four more batches wait behind it.
    for (let i = 0; i < 5; i++) tracer.startSpan(`s${i}`).end();
    expect(sent).toEqual([1]);
    holdNext = false;
    held!({ code: ExportResultCode.SUCCESS });
    // The flush comes before the microtask that would send the next batch.
    await processor.forceFlush();
    expect(sent).toEqual([1, 1, 1, 1, 1]);
  });

  it("a flush waits for what was held when it was called, not for spans that keep coming", async () => {
    const transport = heldTransport();
    const processor = new OtlpStreamProcessor(transport, { maxQueueSize: 100, maxExportBatchSize: 2, scheduledDelayMillis: 60_000 });
    const provider = new BasicTracerProvider({ spanProcessors: [processor] });
    const tracer = provider.getTracer("t");
    for (let i = 0; i < 3; i++) tracer.startSpan(`s${i}`).end();
    let flushed = false;
    const flush = processor.forceFlush().then(() => (flushed = true));
    await new Promise((r) => setTimeout(r, 0));
    expect(flushed).toBe(false);
    // Two batches to wait for: [s0, s1] in flight, [s2] sealed by the flush.
    transport.sent[0].done({ code: ExportResultCode.SUCCESS });
    for (let i = 3; i < 9; i++) tracer.startSpan(`s${i}`).end(); // more arrive meanwhile
    await new Promise((r) => setTimeout(r, 0));
    expect(spanCount(transport.sent[1].bytes)).toBe(1);
    expect(flushed).toBe(false); // [s2] is still in flight
    transport.sent[1].done({ code: ExportResultCode.SUCCESS });
    await flush; // not waiting for s3…s8 (a flush that did would time the test out)
  });

  it("skips unsampled spans and sends waiting ones after the scheduled delay", async () => {
    const transport = heldTransport();
    const processor = new OtlpStreamProcessor(transport, { maxQueueSize: 100, maxExportBatchSize: 50, scheduledDelayMillis: 20 });
    const sdk = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(sdk), processor] });
    const tracer = provider.getTracer("t");
    tracer.startSpan("kept").end();
    const unsampled = trace.setSpanContext(ROOT_CONTEXT, { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: 0 });
    tracer.startSpan("not sampled", {}, unsampled).end();
    expect(transport.sent).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 60));
    expect(transport.sent).toHaveLength(1);
    expect(decoded(transport.sent[0].bytes).resourceSpans[0].scopeSpans[0].spans.map((s: { name: string }) => s.name)).toEqual(["kept"]);
  });
});
