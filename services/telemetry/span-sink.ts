/**
 * The local dashboard's span feed: each service's span processor that publishes, in small
 * msgpack batches on the sink subject, the finished spans of the traces marked for the dashboard
 * (`hadis=d` in their W3C `tracestate`, set by the router's sampler at a bounded rate).
 */
import { SpanStatusCode, type Attributes } from "@opentelemetry/api";
import type { ReadableSpan, SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import { encode } from "../../contracts/envelope.ts";
import type { NatsConnection } from "../nats/connection.ts";

/** A finished span as published on the sink subject: compact (msgpack, plain maps). */
export interface SpanRecord {
  /** Trace id (32 hex). */
  t: string;
  /** Span id (16 hex). */
  s: string;
  /** Parent span id, when any. */
  p?: string;
  /** Span name. */
  n: string;
  /** Service name (resource `service.name`). */
  sv: string;
  /** Span kind (OpenTelemetry SpanKind number). */
  k: number;
  /** Start, epoch ms (fractional). */
  st: number;
  /** Duration, ms. */
  d: number;
  /** Attributes. */
  a: Attributes;
  /** Status: 0 unset, 1 ok, 2 error, with message. */
  e?: string;
  /** Links: trace id / span id pairs. */
  l?: { t: string; s: string }[];
}

/** The `tracestate` member that marks a trace for the local span sink. */
export const SINK_MARK = { key: "hadis", value: "d" } as const;

/** True when the span belongs to a trace marked for the local span sink. */
function markedForSink(span: ReadableSpan): boolean {
  return span.spanContext().traceState?.get(SINK_MARK.key) === SINK_MARK.value;
}

/** Span sinks of the services running in this process (stopped ones leave). */
export function spanSinkCount(): number {
  return sinks.size;
}

const hrMs = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6;

/** Converts a finished span to its compact sink record. */
export function toSpanRecord(span: ReadableSpan): SpanRecord {
  const ctx = span.spanContext();
  const record: SpanRecord = {
    t: ctx.traceId,
    s: ctx.spanId,
    n: span.name,
    sv: String(span.resource.attributes[ATTR_SERVICE_NAME] ?? span.instrumentationScope.name),
    k: span.kind,
    st: hrMs(span.startTime),
    d: hrMs(span.duration),
    a: span.attributes,
  };
  if (span.parentSpanContext) record.p = span.parentSpanContext.spanId;
  if (span.status.code === SpanStatusCode.ERROR) record.e = span.status.message ?? "error";
  if (span.links.length > 0) record.l = span.links.map((l) => ({ t: l.context.traceId, s: l.context.spanId }));
  return record;
}

const sinks = new Set<NatsSpanSink>();

/** Batches the finished spans of marked traces and publishes them, fire-and-forget, on the sink subject. */
export class NatsSpanSink implements SpanProcessor {
  private buffer: SpanRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** `enabled`: whether the feed is on now (the process's configuration may change). */
  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
    private readonly enabled: () => boolean,
  ) {
    sinks.add(this);
  }
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    if (!this.enabled() || !markedForSink(span)) return;
    this.buffer.push(toSpanRecord(span));
    // Small, frequent batches: records held long survive young-generation GC and cost more.
    if (this.buffer.length >= 64) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), 100);
      this.timer.unref();
    }
  }
  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    try {
      if (!this.nc.isClosed()) this.nc.publish(this.subject, encode(batch));
    } catch {
      // Telemetry never fails a request: a closed or draining connection loses these spans.
    }
  }
  async forceFlush(): Promise<void> {
    this.flush();
  }
  async shutdown(): Promise<void> {
    this.flush();
    sinks.delete(this);
  }
}

/**
 * Picks at most `perSecond` events a second (a token bucket holding one second's worth), the
 * first one always; `perSecond` Infinity picks every one.
 */
export class RatePicker {
  private tokens: number;
  private lastMs: number | null = null;
  constructor(
    private readonly perSecond: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = Math.max(1, perSecond);
  }
  pick(): boolean {
    if (this.perSecond === Infinity) return true;
    if (!(this.perSecond > 0)) return false;
    const t = this.now();
    if (this.lastMs !== null)
      this.tokens = Math.min(Math.max(1, this.perSecond), this.tokens + ((t - this.lastMs) / 1000) * this.perSecond);
    this.lastMs = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** Sends what every sink of this process holds. */
export async function flushSinks(): Promise<void> {
  await Promise.all([...sinks].map((k) => k.forceFlush()));
}
