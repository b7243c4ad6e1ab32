/**
 * OTLP/HTTP protobuf export: a batch span processor that encodes each sampled span when it ends
 * (`TraceRequestBuilder`, otlp-proto.ts) and sends the bytes with the OpenTelemetry exporter's
 * own HTTP transport, retries and `OTEL_EXPORTER_OTLP_*` configuration. The SDK's batch
 * processor keeps the spans themselves until their export instead.
 */
import { TraceFlags } from "@opentelemetry/api";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { OTLPExporterBase } from "@opentelemetry/otlp-exporter-base";
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from "@opentelemetry/otlp-exporter-base/node-http";
import { ProtobufTraceSerializer, type ISerializer, type IExportTraceServiceResponse } from "@opentelemetry/otlp-transformer";
import type { ReadableSpan, SpanExporter, SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { TraceRequestBuilder } from "./otlp-proto.ts";

/** Why the export lost spans. */
export type SpanLoss = "queue_full" | "unencodable" | "export_failed";

/** The serializer of already encoded requests: our bytes out, the OTLP library's decoder for responses. */
const encoded: ISerializer<Uint8Array, IExportTraceServiceResponse> = {
  serializeRequest: (bytes) => bytes,
  deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
};

/** The OTLP/HTTP protobuf transport (the OpenTelemetry exporter's HTTP client, retries and `OTEL_EXPORTER_OTLP_*` options). */
export class OtlpProtoTransport extends OTLPExporterBase<Uint8Array> {
  constructor(config: { url?: string } = {}) {
    super(createOtlpHttpExportDelegate(convertLegacyHttpOptions(config, "TRACES", "v1/traces", { "Content-Type": "application/x-protobuf" }), encoded));
  }
}

/** Batch settings, as the batch span processor's. */
export interface StreamBatchOptions {
  /** Spans held at most (encoded, waiting or being exported); beyond, spans are dropped and counted. */
  maxQueueSize: number;
  /** An export is sent once this many spans are waiting. */
  maxExportBatchSize: number;
  /** Waiting spans are sent at least this often. */
  scheduledDelayMillis: number;
  /** Told of every span lost, with why (the service counts them in its metrics). */
  onLoss?: (reason: SpanLoss, spans: number) => void;
}

/**
 * A batch span processor that encodes each sampled span when it ends (the OTLP protobuf bytes are
 * all it keeps) and posts batches of up to `maxExportBatchSize` spans, one export at a time. The
 * SDK's batch processor keeps the spans themselves until their export: at a thousand requests a
 * second that is thousands of span objects living long enough to be promoted out of V8's young
 * generation, and collecting them cost more than encoding them.
 */
export class OtlpStreamProcessor implements SpanProcessor {
  private readonly builder = new TraceRequestBuilder();
  private readonly ready: { bytes: Uint8Array; spans: number }[] = [];
  /** Spans held: encoded and waiting, or in the export in flight. */
  private held = 0;
  private inFlight: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** Batches sealed and batches whose export has completed (they complete in order). */
  private sealed = 0;
  private completed = 0;
  /** Spans dropped (the queue was full, or a span could not be encoded), and spans whose export failed. */
  dropped = 0;
  failed = 0;

  constructor(private readonly transport: { export(bytes: Uint8Array, done: (result: ExportResult) => void): void; shutdown(): Promise<void> }, private readonly opts: StreamBatchOptions) {}

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.held >= this.opts.maxQueueSize) {
      this.dropped++;
      this.opts.onLoss?.("queue_full", 1);
      return;
    }
    try {
      this.builder.add(span);
    } catch {
      // A span that cannot be encoded (a time before 1970 from a bad clock) is lost, not the request.
      this.dropped++;
      this.opts.onLoss?.("unencodable", 1);
      return;
    }
    this.held++;
    if (this.builder.count >= this.opts.maxExportBatchSize) {
      this.seal();
      this.send();
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.seal();
        this.send();
      }, this.opts.scheduledDelayMillis);
      this.timer.unref();
    }
  }

  /** Closes the spans added so far into a request waiting to be sent. */
  private seal(): void {
    if (this.builder.count === 0) return;
    const spans = this.builder.count;
    this.ready.push({ bytes: this.builder.take(), spans });
    this.sealed++;
  }

  /** Sends the next waiting request unless one is in flight; the next follows when it completes. */
  private send(): void {
    if (this.inFlight || this.ready.length === 0) return;
    const next = this.ready.shift()!;
    let resolve!: () => void;
    const current = new Promise<void>((r) => (resolve = r));
    this.inFlight = current;
    let finished = false;
    const done = (ok: boolean) => {
      if (finished) return;
      finished = true;
      if (!ok) {
        this.failed += next.spans;
        this.opts.onLoss?.("export_failed", next.spans);
      }
      this.held -= next.spans;
      this.completed++;
      if (this.inFlight === current) this.inFlight = null;
      resolve();
      // After this call returns: a transport that answers at once must not recurse.
      queueMicrotask(() => this.send());
    };
    try {
      this.transport.export(next.bytes, (result) => done(result.code === ExportResultCode.SUCCESS));
    } catch {
      done(false);
    }
  }

  /** Sends what is held now and waits for it (not for spans that end meanwhile). */
  async forceFlush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.seal();
    const target = this.sealed;
    while (this.completed < target) {
      this.send();
      if (this.inFlight) await this.inFlight;
      // A transport that answered at once (or threw) leaves nothing in flight: send the next now.
      else if (this.ready.length === 0) break;
    }
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
    await this.transport.shutdown();
  }
}

/**
 * An exporter that tells of the spans its inner exporter failed to send (the `http/json` path,
 * through the SDK's batch processor, whose own queue drops only its diagnostics log sees).
 */
export class LossCountingExporter implements SpanExporter {
  constructor(private readonly inner: SpanExporter, private readonly onLoss: (reason: SpanLoss, spans: number) => void) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.onLoss("export_failed", spans.length);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
