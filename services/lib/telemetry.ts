/**
 * The one place that configures OpenTelemetry tracing. Every service asks for its
 * `ServiceTelemetry` (a tracer with its own `service.name`, plus W3C `traceparent` inject/extract
 * over NATS headers); finished spans go to OTLP/HTTP when configured, to exporters a test
 * registers, and, compactly, to the local span sink subject the dashboard listens on.
 *
 * Configuration: `configureTelemetry()` in code, otherwise the environment, read at first use:
 * tracing is on when `HADIS_TRACING=on`, or an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`
 * or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless `OTEL_SDK_DISABLED=true` or
 * `OTEL_TRACES_EXPORTER=none` with no sink. Sampler: `OTEL_TRACES_SAMPLER` / `_ARG`
 * (default parentbased_always_on). `OTEL_SERVICE_NAME` prefixes the per-service names. Off, the
 * services check one boolean per request and do nothing else.
 */
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { context as otelContext, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span, type SpanOptions, type Tracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import { encode } from "../../contracts/envelope.ts";
import { newHeaders, type MsgHdrs, type NatsConnection } from "./nats.ts";

export { SpanKind, SpanStatusCode };
export type { Attributes, Context, Link, Span };

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
  /** OTLP/HTTP traces URL (`…/v1/traces`); default from the OTEL_* environment. */
  otlpUrl?: string | null;
  sampler?: Sampler;
  /** Prefix of the sink subject. */
  subjectPrefix?: string;
}

interface State {
  enabled: boolean;
  spanSink: boolean;
  sampler: Sampler;
  shared: SpanProcessor[];
  subjectPrefix: string;
  generation: number;
}

let state: State | null = null;

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

/** The sampler named by `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`. */
export function samplerFromEnv(): Sampler {
  const name = envFlag("OTEL_TRACES_SAMPLER") ?? "parentbased_always_on";
  const arg = Number(process.env.OTEL_TRACES_SAMPLER_ARG ?? "1");
  const ratio = Number.isFinite(arg) ? Math.min(1, Math.max(0, arg)) : 1;
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

function fromEnv(): TelemetryOptions {
  if (envFlag("OTEL_SDK_DISABLED") === "true") return { enabled: false };
  const otlpUrl = envFlag("OTEL_TRACES_EXPORTER") === "none" ? null : otlpUrlFromEnv();
  const hadis = envFlag("HADIS_TRACING");
  const enabled = hadis === "on" || hadis === "true" || hadis === "1" || (hadis !== "off" && otlpUrl !== null);
  const sink = envFlag("HADIS_SPAN_SINK");
  return { enabled, otlpUrl, spanSink: sink === undefined ? enabled : sink === "on" || sink === "true" || sink === "1" };
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
  if (enabled && otlpUrl) shared.push(new BatchSpanProcessor(new OTLPTraceExporter({ url: otlpUrl }), { scheduledDelayMillis: 1_000 }));
  for (const exporter of opts.exporters ?? []) shared.push(new SimpleSpanProcessor(exporter));
  state = {
    enabled,
    spanSink: enabled && (opts.spanSink ?? env.spanSink ?? true),
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
    st: span.startTime[0] * 1e3 + span.startTime[1] / 1e6,
    d: span.duration[0] * 1e3 + span.duration[1] / 1e6,
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
    if (!current().spanSink) return;
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

const propagator = new W3CTraceContextPropagator();
const headerSetter = { set: (carrier: MsgHdrs, key: string, value: string) => carrier.set(key, value) };
const headerGetter = {
  get: (carrier: MsgHdrs | undefined, key: string) => carrier?.get(key) || undefined,
  keys: (carrier: MsgHdrs | undefined) => (carrier ? [...carrier.keys()] : []),
};

const lookupGetter = {
  get: (lookup: (name: string) => string | undefined, key: string) => lookup(key),
  keys: () => [],
};

/** One service's tracing: a tracer named after it and the NATS header propagation. */
export class ServiceTelemetry {
  private tracerOf: { generation: number; tracer: Tracer } | null = null;
  private sink: NatsSpanSink | null = null;

  constructor(readonly serviceName: string, private readonly nc: NatsConnection | null, private readonly instanceId?: string) {}

  /** True when spans should be made now (checked once per request; everything else is skipped when false). */
  get on(): boolean {
    return current().enabled;
  }

  /** The tracer (rebuilt after a reconfiguration). */
  get tracer(): Tracer {
    const s = current();
    if (this.tracerOf?.generation !== s.generation) {
      if (this.nc && !this.sink) this.sink = new NatsSpanSink(this.nc, spanSinkSubject(s.subjectPrefix));
      const provider = new BasicTracerProvider({
        resource: resourceFromAttributes({
          [ATTR_SERVICE_NAME]: process.env.OTEL_SERVICE_NAME ? `${process.env.OTEL_SERVICE_NAME}.${this.serviceName}` : this.serviceName,
          ...(this.instanceId ? { "service.instance.id": this.instanceId } : {}),
        }),
        sampler: s.sampler,
        spanProcessors: [new ServiceProcessor(this.sink)],
      });
      this.tracerOf = { generation: s.generation, tracer: provider.getTracer(this.serviceName) };
    }
    return this.tracerOf.tracer;
  }

  /** Starts a span under `parent` (a context, or none for a new trace). */
  start(name: string, options: SpanOptions, parent: Context = ROOT_CONTEXT): Span {
    return this.tracer.startSpan(name, options, parent);
  }

  /** A context whose active span is `span` (the parent for children and for injection). */
  contextOf(span: Span, base: Context = ROOT_CONTEXT): Context {
    return trace.setSpan(base, span);
  }

  /** The trace context carried by NATS headers (ROOT_CONTEXT when none). */
  extract(headers: MsgHdrs | undefined): Context {
    if (!headers) return ROOT_CONTEXT;
    return propagator.extract(ROOT_CONTEXT, headers, headerGetter);
  }

  /** The trace context read through a header lookup (e.g. a queue delivery's headers). */
  extractWith(header: (name: string) => string | undefined): Context {
    return propagator.extract(ROOT_CONTEXT, header, lookupGetter);
  }

  /** Writes `traceparent` (and `tracestate`) of `ctx` into `headers` (new headers when none given). */
  inject(ctx: Context, headers: MsgHdrs = newHeaders()): MsgHdrs {
    propagator.inject(ctx, headers, headerSetter);
    return headers;
  }

  /** The span context carried by NATS headers, for links. */
  linkFrom(headers: MsgHdrs | undefined, attributes?: Attributes): Link | null {
    const ctx = trace.getSpanContext(this.extract(headers));
    return ctx ? { context: ctx, attributes } : null;
  }
}

/** Ends `span` with an error status. */
export function endWithError(span: Span, err: unknown): void {
  const code = (err as { code?: string })?.code;
  span.setStatus({ code: SpanStatusCode.ERROR, message: code ?? (err instanceof Error ? err.message : String(err)) });
  if (code) span.setAttribute("hadis.error.code", code);
  span.end();
}

/** The active context (for callers that use the global context manager). */
export const activeContext = () => otelContext.active();
