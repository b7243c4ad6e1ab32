/**
 * Lost spans in the log as well as the metrics: the first loss at once, then at most one line
 * per `everyMs` with what was lost since, by reason, so a collector that is down shows in the
 * service's log without a line per span.
 */
import type { Logger } from "./log.ts";

/** Why the OTLP export lost spans: its queue was full, an export failed, or no exporter could be built. */
export type SpanLoss = "queue_full" | "export_failed" | "exporter_unavailable";

/** Lost spans, logged at a bounded rate. */
export class SpanLossLog {
  private pending = new Map<SpanLoss, number>();
  private lastMs: number | null = null;

  constructor(
    private readonly log: Pick<Logger, "warn">,
    private readonly everyMs = 10_000,
  ) {}

  /** `spans` lost for `reason` at `nowMs`; logs what is pending when the interval allows. */
  report(reason: SpanLoss, spans: number, nowMs: number): void {
    this.pending.set(reason, (this.pending.get(reason) ?? 0) + spans);
    if (this.lastMs !== null && nowMs - this.lastMs < this.everyMs) return;
    const since = this.lastMs;
    this.lastMs = nowMs;
    this.log.warn("trace_spans_lost", {
      ...Object.fromEntries(this.pending),
      ...(since === null ? {} : { sinceMs: nowMs - since }),
      hint: "see hadis_trace_spans_lost_total; queue_full: raise OTEL_BSP_MAX_QUEUE_SIZE or sample; export_failed: is the collector up?; exporter_unavailable: see the telemetry.exporter_failed line",
    });
    this.pending = new Map();
  }
}
