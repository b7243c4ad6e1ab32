/**
 * The OTLP export of spans: OpenTelemetry's batch span processor in front of its OTLP/HTTP
 * exporter (protobuf, or JSON when `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), with every span it
 * loses counted: the batch processor drops spans past its queue and a failed export with no more
 * than a diagnostic line, and an operator needs to see both.
 */
import { TraceFlags, type Context } from "@opentelemetry/api";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { BatchSpanProcessor, type ReadableSpan, type Span, type SpanExporter, type SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter as OtlpProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { OTLPTraceExporter as OtlpJsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import type { BatchSettings, OtlpProtocol } from "./config.ts";
import type { SpanLoss } from "./span-loss.ts";

/** The OTLP/HTTP exporter of `protocol` posting to `url` (its other options from `OTEL_EXPORTER_OTLP_*`); throws on a URL it cannot use. */
export function otlpExporter(url: string, protocol: OtlpProtocol): SpanExporter {
  return protocol === "http/json" ? new OtlpJsonExporter({ url }) : new OtlpProtoExporter({ url });
}

/**
 * A batch span processor whose losses are counted: a span that would find the batch processor's
 * queue full is dropped here, told to `onLoss`, and so is every span of a failed export. Spans
 * are in the queue from their end until their export starts, as in the batch processor.
 */
export class CountedBatchProcessor implements SpanProcessor {
  private readonly batch: BatchSpanProcessor;
  private queued = 0;

  constructor(
    exporter: SpanExporter,
    private readonly settings: BatchSettings,
    private readonly onLoss: (reason: SpanLoss, spans: number) => void,
  ) {
    const counted: SpanExporter = {
      export: (spans: ReadableSpan[], done: (result: ExportResult) => void) => {
        this.queued = Math.max(0, this.queued - spans.length);
        exporter.export(spans, (result) => {
          if (result.code !== ExportResultCode.SUCCESS) this.onLoss("export_failed", spans.length);
          done(result);
        });
      },
      shutdown: () => exporter.shutdown(),
      forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
    };
    this.batch = new BatchSpanProcessor(counted, settings);
  }

  onStart(span: Span, parent: Context): void {
    this.batch.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    // (The batch processor takes sampled spans only.)
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queued >= this.settings.maxQueueSize) {
      this.onLoss("queue_full", 1);
      return;
    }
    this.queued++;
    this.batch.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown();
  }
}
