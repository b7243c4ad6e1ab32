/**
 * The one place that configures OpenTelemetry tracing. Every service asks for its
 * `ServiceTelemetry` (a tracer with its own `service.name`, plus W3C `traceparent` inject/extract
 * over NATS headers); finished spans go to OTLP/HTTP when configured, to exporters a test
 * registers, and, compactly, to the local span sink subject the dashboard listens on.
 *
 * Configuration: `configureTelemetry()` in code, otherwise the environment, read at first use:
 * tracing is on when `HADIS_TRACING=on`, or an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`
 * or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; encoding `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`,
 * `http/protobuf` by default as the specification says, or `http/json`), unless `OTEL_SDK_DISABLED=true` or
 * `OTEL_TRACES_EXPORTER=none` with no sink. Sampler: `OTEL_TRACES_SAMPLER` / `_ARG`
 * (default parentbased_always_on). `OTEL_SERVICE_NAME` prefixes the per-service names;
 * `OTEL_RESOURCE_ATTRIBUTES` adds to every service's resource. Off, the
 * services check one boolean per request and do nothing else.
 *
 * The local span sink carries only the traces picked for the dashboard: the router marks at most
 * `HADIS_SPAN_SINK_RATE` requests a second (default 20; `all` for every one) with `hadis=d` in
 * their W3C `tracestate`, which travels with the trace to the other services; every service's
 * sink forwards the spans of marked traces only. Exporters (OTLP, tests) get every span; with
 * none configured, only marked traces are recorded at all (nothing else would read them).
 */
import { subjects as buildSubjects, Headers } from "../../contracts/subjects.ts";
import { SpanKind, SpanStatusCode, type Attributes, type Context, type Link, type Span, type SpanContext, type SpanOptions } from "@opentelemetry/api";
import { defaultResource, detectResources, envDetector, resourceFromAttributes, type Resource } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter as OTLPJsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { LossCountingExporter, OtlpProtoTransport, OtlpStreamProcessor, type SpanLoss, type StreamBatchOptions } from "./otlp-export.ts";
import { createLogger } from "./log.ts";
import { SpanLossLog } from "./span-loss.ts";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import { encode } from "../../contracts/envelope.ts";
import { trustedHeaders, type MsgHdrs, type NatsConnection } from "./nats.ts";
import { LeanSpan, LeanTracer, nowMs } from "./lean-tracer.ts";
import { spanContextOf, traceparentOf } from "./trace-context.ts";
import { recordSpansLost } from "./metrics.ts";

export { SpanKind, SpanStatusCode };
/**
 * Epoch milliseconds, fractional, on the spans' clock: times a span of another service starts at
 * (an item's enqueue, a batch's start) are read from it, so no child starts before its parent.
 */
export const spanClockMs = nowMs;
export type { Attributes, Context, Link, Span, SpanContext };

/** Subject on which services publish finished spans for the local dashboard (one msgpack array of SpanRecord per message). */
export const spanSinkSubject = (prefix = "hadis") => buildSubjects(prefix).telemetrySpans;

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

/** How tracing runs in this process. */
export interface TelemetryOptions {
  enabled?: boolean;
  /** Publish finished spans on the sink subject (the dashboard's feed). Default: on when enabled. */
  spanSink?: boolean;
  /** Extra exporters (tests: an InMemorySpanExporter). Exported synchronously, span by span. */
  exporters?: SpanExporter[];
  /** Extra span processors, given every finished span as it ends (benchmarks: one that drops them). */
  processors?: SpanProcessor[];
  /** OTLP/HTTP traces URL (`…/v1/traces`); default from the OTEL_* environment. */
  otlpUrl?: string | null;
  /** OTLP/HTTP encoding; default from the OTEL_* environment, else `http/protobuf`. */
  otlpProtocol?: OtlpProtocol;
  sampler?: Sampler;
  /** Prefix of the sink subject. */
  subjectPrefix?: string;
  /** Traces a second the router marks for the sink (Infinity: every trace). Default 20. */
  sinkTracesPerSecond?: number;
}

interface State {
  enabled: boolean;
  spanSink: boolean;
  sinkTracesPerSecond: number;
  sampler: Sampler;
  shared: SpanProcessor[];
  subjectPrefix: string;
  generation: number;
}

let state: State | null = null;

/** Name of a request's root span (the router's `hadis.generate` server span). */
export const REQUEST_SPAN = "hadis.generate";

/** Requests a second whose traces reach the local dashboard by default. */
const DEFAULT_SINK_TRACES_PER_SECOND = 20;

/** The `tracestate` member that marks a trace for the local span sink. */
const SINK_MARK = { key: "hadis", value: "d" } as const;

/** True when the span belongs to a trace marked for the local span sink. */
function markedForSink(span: ReadableSpan): boolean {
  return span.spanContext().traceState?.get(SINK_MARK.key) === SINK_MARK.value;
}

function envFlag(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v.trim().toLowerCase();
}

/** The OTLP/HTTP traces URL from the standard environment, or null. */
export function otlpUrlFromEnv(): string | null {
  const traces = process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (traces) return traces;
  const base = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!base) return null;
  return `${base.replace(/\/+$/, "")}/v1/traces`;
}

/** The OTLP/HTTP encodings this process can export. */
export type OtlpProtocol = "http/protobuf" | "http/json";

/** The OTLP encoding from `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` (gRPC is not offered: protobuf). */
function otlpProtocolFromEnv(): OtlpProtocol {
  const name = envFlag("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? envFlag("OTEL_EXPORTER_OTLP_PROTOCOL");
  return name === "http/json" ? "http/json" : "http/protobuf";
}

/**
 * Batch settings from `OTEL_BSP_*`, with defaults of our own: exports of up to 1,024 spans, at
 * least every second, and a queue of 8,192 (about a second of spans at 1,000 requests/s) to ride
 * out a slow collector, since only one export runs at a time and spans beyond the queue are dropped.
 * A value that is not a whole number in range is ignored (the default stands); a delay of 0 sends
 * at the next turn of the event loop.
 */
export function batchSettings(vars: NodeJS.ProcessEnv = process.env): StreamBatchOptions {
  // Sizes are whole numbers from 1; the delay may be 0 (send at the next turn of the event loop).
  const env = (name: string, fallback: number, least: number) => {
    const v = Number(vars[name]);
    return vars[name]?.trim() && Number.isInteger(v) && v >= least ? v : fallback;
  };
  const maxQueueSize = env("OTEL_BSP_MAX_QUEUE_SIZE", 8_192, 1);
  return {
    maxQueueSize,
    maxExportBatchSize: Math.min(maxQueueSize, env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1_024, 1)),
    scheduledDelayMillis: env("OTEL_BSP_SCHEDULE_DELAY", 1_000, 0),
  };
}

/** Spans the OTLP export loses, in this process's log (the metrics count them too). */
const lossLog = new SpanLossLog(createLogger("telemetry"));

/** Samplers built here that answer a child span with its parent's sampled flag (the tracer then skips asking them). */
const parentBasedSamplers = new WeakSet<Sampler>();
const parentBased = (s: Sampler) => (parentBasedSamplers.add(s), s);

/** The sampler named by `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`. */
export function samplerFromEnv(): Sampler {
  return samplerNamed(envFlag("OTEL_TRACES_SAMPLER") ?? "parentbased_always_on", Number(process.env.OTEL_TRACES_SAMPLER_ARG ?? "1"));
}

/** A sampler by its `OTEL_TRACES_SAMPLER` name and argument (a ratio, clamped to [0, 1]). */
export function samplerNamed(name: string, arg = 1): Sampler {
  const ratio = Number.isFinite(arg) ? Math.min(1, Math.max(0, arg)) : 1;
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_off":
      return parentBased(new ParentBasedSampler({ root: new AlwaysOffSampler() }));
    case "parentbased_traceidratio":
      return parentBased(new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) }));
    default:
      return parentBased(new ParentBasedSampler({ root: new AlwaysOnSampler() }));
  }
}

function fromEnv(): TelemetryOptions {
  if (envFlag("OTEL_SDK_DISABLED") === "true") return { enabled: false };
  const otlpUrl = envFlag("OTEL_TRACES_EXPORTER") === "none" ? null : otlpUrlFromEnv();
  const hadis = hadisTracingSwitch();
  const enabled = hadis === "on" || (hadis !== "off" && otlpUrl !== null);
  const sink = envFlag("HADIS_SPAN_SINK");
  const rate = envFlag("HADIS_SPAN_SINK_RATE");
  const perSecond = rate === undefined ? undefined : rate === "all" ? Infinity : Number(rate);
  return {
    enabled,
    otlpUrl,
    // Unset: on whenever tracing is (`configureTelemetry`'s default), whoever turns tracing on.
    ...(sink === undefined ? {} : { spanSink: sink === "on" || sink === "true" || sink === "1" }),
    ...(perSecond !== undefined && perSecond >= 0 ? { sinkTracesPerSecond: perSecond } : {}),
  };
}

/**
 * Configures tracing for this process (replaces any earlier configuration; services pick it up at
 * their next request). Without a call, the environment decides at first use.
 */
export function configureTelemetry(opts: TelemetryOptions = {}): void {
  const previous = state;
  const env = fromEnv();
  const enabled = opts.enabled ?? env.enabled ?? false;
  const otlpUrl = opts.otlpUrl === undefined ? (env.otlpUrl ?? null) : opts.otlpUrl;
  const shared: SpanProcessor[] = [];
  if (enabled && otlpUrl) {
    const protocol = opts.otlpProtocol ?? otlpProtocolFromEnv();
    const onLoss = (reason: SpanLoss, spans: number) => {
      recordSpansLost(reason, spans);
      lossLog.report(reason, spans, Date.now());
    };
    shared.push(protocol === "http/json"
      ? new BatchSpanProcessor(new LossCountingExporter(new OTLPJsonTraceExporter({ url: otlpUrl }), onLoss), batchSettings())
      : new OtlpStreamProcessor(new OtlpProtoTransport({ url: otlpUrl }), { ...batchSettings(), onLoss }));
  }
  for (const exporter of opts.exporters ?? []) shared.push(new SimpleSpanProcessor(exporter));
  shared.push(...(opts.processors ?? []));
  state = {
    enabled,
    spanSink: enabled && (opts.spanSink ?? env.spanSink ?? true),
    sinkTracesPerSecond: opts.sinkTracesPerSecond ?? env.sinkTracesPerSecond ?? DEFAULT_SINK_TRACES_PER_SECOND,
    sampler: opts.sampler ?? samplerFromEnv(),
    shared,
    subjectPrefix: opts.subjectPrefix ?? "hadis",
    generation: (previous?.generation ?? 0) + 1,
  };
  if (previous) void Promise.all(previous.shared.map((p) => p.shutdown().catch(() => undefined)));
}

function current(): State {
  if (!state) configureTelemetry();
  return state!;
}

/** True when tracing is on in this process. */
export function tracingEnabled(): boolean {
  return current().enabled;
}

/** Whether finished spans of the dashboard's traces are published on the span feed. */
export function spanSinkEnabled(): boolean {
  return current().spanSink;
}

/** The environment turns tracing off (`OTEL_SDK_DISABLED=true`, or `HADIS_TRACING=off`): nothing may turn it on. */
export function tracingOptedOut(): boolean {
  return envFlag("OTEL_SDK_DISABLED") === "true" || hadisTracingSwitch() === "off";
}

/** `HADIS_TRACING`, read one way wherever it is read: on (`on`, `true`, `1`), off (`off`, `false`, `0`) or unset. */
function hadisTracingSwitch(): "on" | "off" | undefined {
  const v = envFlag("HADIS_TRACING");
  return v === "on" || v === "true" || v === "1" ? "on" : v === "off" || v === "false" || v === "0" ? "off" : undefined;
}

/** Span sinks of the services running in this process (stopped ones leave). */
export function spanSinkCount(): number {
  return sinks.size;
}

/** Flushes every exporter (tests, shutdown). */
export async function flushTelemetry(): Promise<void> {
  const s = current();
  await Promise.all([...s.shared.map((p) => p.forceFlush()), ...[...sinks].map((k) => k.forceFlush())]);
}

/** Flushes and stops the exporters; tracing is off afterwards. */
export async function shutdownTelemetry(): Promise<void> {
  await flushTelemetry().catch(() => undefined);
  const s = current();
  await Promise.all(s.shared.map((p) => p.shutdown().catch(() => undefined)));
  state = { ...s, enabled: false, spanSink: false, shared: [], generation: s.generation + 1 };
}

/** Converts a finished span to its compact sink record. */
export function toSpanRecord(span: ReadableSpan): SpanRecord {
  const ctx = span.spanContext();
  const record: SpanRecord = {
    t: ctx.traceId,
    s: ctx.spanId,
    n: span.name,
    sv: String(span.resource.attributes[ATTR_SERVICE_NAME] ?? span.instrumentationScope.name),
    k: span.kind,
    st: span instanceof LeanSpan ? span.startMs : span.startTime[0] * 1e3 + span.startTime[1] / 1e6,
    d: span instanceof LeanSpan ? span.endMs - span.startMs : span.duration[0] * 1e3 + span.duration[1] / 1e6,
    a: span.attributes,
  };
  if (span.parentSpanContext) record.p = span.parentSpanContext.spanId;
  if (span.status.code === SpanStatusCode.ERROR) record.e = span.status.message ?? "error";
  if (span.links.length > 0) record.l = span.links.map((l) => ({ t: l.context.traceId, s: l.context.spanId }));
  return record;
}

const sinks = new Set<NatsSpanSink>();

/** Batches finished spans and publishes them, fire-and-forget, on the sink subject. */
class NatsSpanSink implements SpanProcessor {
  private buffer: SpanRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  constructor(private readonly nc: NatsConnection, private readonly subject: string) {
    sinks.add(this);
  }
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    if (!current().spanSink || !markedForSink(span)) return;
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

/** Fans a span out to the process-wide processors of the moment and to this service's sink. */
class ServiceProcessor implements SpanProcessor {
  constructor(private readonly sink: NatsSpanSink | null) {}
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    for (const p of current().shared) p.onEnd(span);
    this.sink?.onEnd(span);
  }
  async forceFlush(): Promise<void> {
    await this.sink?.forceFlush();
  }
  async shutdown(): Promise<void> {
    await this.sink?.shutdown();
  }
}

/**
 * Picks at most `perSecond` events a second (a token bucket holding one second's worth), the
 * first one always; `perSecond` Infinity picks every one.
 */
export class RatePicker {
  private tokens: number;
  private lastMs: number | null = null;
  constructor(private readonly perSecond: number, private readonly now: () => number = () => performance.now()) {
    this.tokens = Math.max(1, perSecond);
  }
  pick(): boolean {
    if (this.perSecond === Infinity) return true;
    if (!(this.perSecond > 0)) return false;
    const t = this.now();
    if (this.lastMs !== null) this.tokens = Math.min(Math.max(1, this.perSecond), this.tokens + ((t - this.lastMs) / 1000) * this.perSecond);
    this.lastMs = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** One service's tracing: a tracer named after it and the NATS header propagation. */
export class ServiceTelemetry {
  private tracerOf: { generation: number; tracer: LeanTracer } | null = null;
  private sink: NatsSpanSink | null = null;

  /**
   * `sinkRoot`: the name of this service's request root spans, when it starts the traces the
   * dashboard sees (the router); those get the sink mark at the configured rate.
   */
  constructor(
    readonly serviceName: string,
    private readonly nc: NatsConnection | null,
    private readonly instanceId?: string,
    private readonly sinkRoot?: string,
  ) {}

  /** True when spans should be made now (checked once per request; everything else is skipped when false). */
  get on(): boolean {
    return current().enabled;
  }

  /** The tracer (rebuilt after a reconfiguration). */
  get tracer(): LeanTracer {
    const s = current();
    if (this.tracerOf?.generation !== s.generation) {
      if (this.nc && !this.sink) this.sink = new NatsSpanSink(this.nc, spanSinkSubject(s.subjectPrefix));
      const picker = new RatePicker(s.sinkTracesPerSecond);
      const tracer = new LeanTracer({
        resource: serviceResource(this.serviceName, this.instanceId),
        scope: { name: this.serviceName },
        sampler: s.sampler,
        parentBased: parentBasedSamplers.has(s.sampler),
        processor: new ServiceProcessor(this.sink),
        ...(this.sinkRoot && s.spanSink ? { mark: { name: this.sinkRoot, ...SINK_MARK, pick: () => picker.pick() } } : {}),
        // No exporter: the sink's traces are the only ones anybody reads.
        ...(s.shared.length === 0 ? { recordOnly: SINK_MARK } : {}),
      });
      this.tracerOf = { generation: s.generation, tracer };
    }
    return this.tracerOf.tracer;
  }

  /**
   * Starts a span under `parent` (a span context, from this process or extracted; none for a new
   * trace). The span takes `options.attributes` as its own: pass a fresh object.
   */
  start(name: string, options: SpanOptions, parent?: SpanContext): Span {
    return this.tracer.startChild(name, options, parent);
  }

  /** Sends what this service's span sink holds and lets it go (a stopped service; the process may start others). */
  async close(): Promise<void> {
    await this.sink?.shutdown();
    this.sink = null;
    this.tracerOf = null;
  }

  /** The span context carried by NATS headers (`traceparent`, `tracestate`), if any. */
  extract(headers: MsgHdrs | undefined): SpanContext | undefined {
    if (!headers) return undefined;
    return spanContextOf((name) => headers.get(name) || undefined);
  }

  /** The span context read through a header lookup (e.g. a queue delivery's headers). */
  extractWith(header: (name: string) => string | undefined): SpanContext | undefined {
    return spanContextOf(header);
  }

  /**
   * Headers carrying `parent` as `traceparent` (and `tracestate`), written into `headers` when
   * given, as the W3C propagator does, without re-validating ids this process made or checked.
   */
  inject(parent: SpanContext, headers?: MsgHdrs): MsgHdrs {
    const traceparent = traceparentOf(parent);
    const tracestate = parent.traceState?.serialize();
    if (!headers) return trustedHeaders(tracestate ? { [Headers.traceparent]: [traceparent], [Headers.tracestate]: [tracestate] } : { [Headers.traceparent]: [traceparent] });
    headers.set(Headers.traceparent, traceparent);
    if (tracestate) headers.set(Headers.tracestate, tracestate);
    return headers;
  }
}

/**
 * A service's resource: the SDK's own attributes (`telemetry.sdk.*`), then `OTEL_RESOURCE_ATTRIBUTES`
 * (`deployment.environment=prod,k8s.pod.name=…`), then ours, which win: `service.name` (the
 * service's, after `OTEL_SERVICE_NAME` and a dot when that is set) and `service.instance.id`.
 */
export function serviceResource(serviceName: string, instanceId?: string): Resource {
  return defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({
      [ATTR_SERVICE_NAME]: process.env.OTEL_SERVICE_NAME ? `${process.env.OTEL_SERVICE_NAME}.${serviceName}` : serviceName,
      ...(instanceId ? { "service.instance.id": instanceId } : {}),
    }));
}

/** Ends `span` with an error status. */
export function endWithError(span: Span, err: unknown): void {
  // Our errors' codes are strings; other libraries' may be numbers (a JetStream API error's 10077).
  const raw = (err as { code?: unknown })?.code;
  const code = typeof raw === "string" || typeof raw === "number" ? String(raw) : undefined;
  span.setStatus({ code: SpanStatusCode.ERROR, message: code ?? (err instanceof Error ? err.message : String(err)) });
  if (code) span.setAttribute("hadis.error.code", code);
  span.end();
}

