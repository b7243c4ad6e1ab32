import { describe, expect, it } from "vitest";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { batchSettings, configureTelemetry, flushTelemetry, ServiceTelemetry } from "../../services/telemetry/tracing.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import { freePort } from "../../services/nats/server.ts";
import { CountedBatchProcessor } from "../../services/telemetry/span-export.ts";
import { SpanLossLog, type SpanLoss } from "../../services/telemetry/span-loss.ts";

/** An exporter that records each export and completes it only when told. */
function heldExporter() {
  const sent: { spans: ReadableSpan[]; done: (r: ExportResult) => void }[] = [];
  const exporter: SpanExporter = { export: (spans, done) => void sent.push({ spans, done }), shutdown: async () => undefined };
  return { sent, exporter };
}

describe("OTEL_BSP_* batch settings", () => {
  it("takes whole numbers in range, a delay of 0 included, and keeps the default for anything else", () => {
    expect(batchSettings({})).toEqual({ maxQueueSize: 8_192, maxExportBatchSize: 1_024, scheduledDelayMillis: 1_000 });
    expect(batchSettings({ OTEL_BSP_SCHEDULE_DELAY: "0", OTEL_BSP_MAX_QUEUE_SIZE: "100", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "50" })).toEqual({
      maxQueueSize: 100,
      maxExportBatchSize: 50,
      scheduledDelayMillis: 0,
    });
    for (const bad of ["", " ", "-1", "2.5", "ten", "Infinity"]) {
      expect(batchSettings({ OTEL_BSP_SCHEDULE_DELAY: bad, OTEL_BSP_MAX_QUEUE_SIZE: bad, OTEL_BSP_MAX_EXPORT_BATCH_SIZE: bad })).toEqual(
        batchSettings({}),
      );
    }
    // A queue of 0 would drop every span: the default stands. A batch never exceeds the queue.
    expect(batchSettings({ OTEL_BSP_MAX_QUEUE_SIZE: "0" }).maxQueueSize).toBe(8_192);
    expect(batchSettings({ OTEL_BSP_MAX_QUEUE_SIZE: "10", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "512" }).maxExportBatchSize).toBe(10);
  });

  it("with a delay of 0 a lone span is sent at the next turn of the event loop", async () => {
    const { sent, exporter } = heldExporter();
    const processor = new CountedBatchProcessor(exporter, batchSettings({ OTEL_BSP_SCHEDULE_DELAY: "0" }), () => undefined);
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, processors: [processor] });
    new ServiceTelemetry("hadis-router", null).start("alone", {}).end();
    expect(sent).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 5));
    expect(sent).toHaveLength(1);
    configureTelemetry({ enabled: false });
  });
});

describe("the export's queue", () => {
  it("drops and counts what it cannot hold while an export is slow, and counts a failed export's spans", async () => {
    const lost: [SpanLoss, number][] = [];
    const { sent, exporter } = heldExporter();
    const processor = new CountedBatchProcessor(
      exporter,
      batchSettings({ OTEL_BSP_MAX_QUEUE_SIZE: "4", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "2", OTEL_BSP_SCHEDULE_DELAY: "10000" }),
      (reason, n) => void lost.push([reason, n]),
    );
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, processors: [processor] });
    const t = new ServiceTelemetry("hadis-router", null);
    // Two spans fill a batch, which goes out and is held: its spans have left the queue.
    for (let i = 0; i < 2; i++) t.start(`a${i}`, {}).end();
    await new Promise((r) => setTimeout(r, 5));
    expect(sent.map((x) => x.spans.length)).toEqual([2]);
    // The batch processor sends one export at a time: the next spans wait in the queue of 4.
    for (let i = 0; i < 7; i++) t.start(`b${i}`, {}).end();
    expect(lost).toEqual([
      ["queue_full", 1],
      ["queue_full", 1],
      ["queue_full", 1],
    ]);
    sent[0].done({ code: ExportResultCode.FAILED, error: new Error("collector down") });
    expect(lost.at(-1)).toEqual(["export_failed", 2]);
    configureTelemetry({ enabled: false });
  });
});

describe("lost spans on the http/json path", () => {
  it("are counted in hadis_trace_spans_lost_total when the collector cannot be reached", async () => {
    const lost = async () => Number(/^hadis_trace_spans_lost_total\{reason="export_failed"\} (\S+)$/m.exec(await metricsText())?.[1] ?? 0);
    const before = await lost();
    const port = await freePort(); // nothing listens there
    configureTelemetry({ enabled: true, spanSink: false, otlpUrl: `http://127.0.0.1:${port}/v1/traces`, otlpProtocol: "http/json" });
    const t = new ServiceTelemetry("hadis-router", null);
    for (let i = 0; i < 3; i++) t.start(`s${i}`, {}).end();
    await flushTelemetry().catch(() => undefined);
    expect((await lost()) - before).toBe(3);
    configureTelemetry({ enabled: false });
  });
});

describe("SpanLossLog", () => {
  it("logs the first loss at once, then at most one line an interval with what was lost since, by reason", () => {
    const lines: Record<string, unknown>[] = [];
    const log = new SpanLossLog({ warn: (event, fields) => void lines.push({ event, ...fields }) }, 10_000);
    log.report("export_failed", 512, 1_000);
    expect(lines).toEqual([expect.objectContaining({ event: "trace_spans_lost", export_failed: 512 })]);
    log.report("export_failed", 512, 3_000);
    log.report("queue_full", 7, 9_000);
    expect(lines).toHaveLength(1);
    log.report("queue_full", 1, 11_000);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ export_failed: 512, queue_full: 8, sinceMs: 10_000 });
    // Nothing carried over into the next interval.
    log.report("exporter_unavailable", 1, 21_000);
    expect(lines[2]).toMatchObject({ exporter_unavailable: 1 });
    expect(lines[2]).not.toHaveProperty("queue_full");
  });
});
