/**
 * The one place that configures OpenTelemetry tracing, on the OpenTelemetry SDK. Every service
 * asks for its `ServiceTelemetry`: a tracer provider with its own `service.name`, the configured
 * parent-based sampler and span processors, and W3C `traceparent` inject/extract over NATS
 * headers (the SDK's W3C propagator). Finished spans go to the OTLP export when configured (a
 * batch span processor and the official OTLP/HTTP exporter: `span-export.ts`), to exporters a test
 * registers, and, compactly, to the local span sink subject the dashboard listens on (a span
 * processor of each service).
 *
 * Configuration: `configureTelemetry()` in code, otherwise the environment, read at first use
 * (`config.ts` reads it and checks it at start): tracing is on when `HADIS_TRACING=on`,
 * or an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`;
 * encoding `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`, `http/protobuf` by default or `http/json`),
 * unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` with no sink. Sampler:
 * `OTEL_TRACES_SAMPLER` / `_ARG` (default parentbased_always_on). `OTEL_SERVICE_NAME` prefixes the
 * per-service names; `OTEL_RESOURCE_ATTRIBUTES` adds to every service's resource. Off, the
 * services check one boolean per request and do nothing else.
 *
 * The local span sink carries only the traces picked for the dashboard: the router marks at most
 * `HADIS_SPAN_SINK_RATE` requests a second (default 20; `all` for every one) with `hadis=d` in
 * their W3C `tracestate` (its sampler does, as a sampler may), which travels with the trace to
 * the other services; every service's sink forwards the spans of marked traces only. Exporters
 * (OTLP, tests) get every sampled span; with none configured, only marked traces are recorded at
 * all (nothing else would read them).
 *
 * Telemetry never fails a request: an exporter that cannot be built, a tracer that cannot be made,
 * a lost export are counted (`hadis_trace_spans_lost_total`) and logged at a bounded rate.
 */
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import {
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  createTraceState,
  isSpanContextValid,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { defaultResource, detectResources, envDetector, resourceFromAttributes, type Resource } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  ParentBasedSampler,
  SamplingDecision,
  SimpleSpanProcessor,
  type ReadableSpan,
  type Sampler,
  type SamplingResult,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import {
  ATTR_MESSAGING_BATCH_MESSAGE_COUNT,
  ATTR_MESSAGING_CONSUMER_GROUP_NAME,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_DESTINATION_TEMPORARY,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_SYSTEM,
} from "@opentelemetry/semantic-conventions/incubating";
import { createLogger } from "./log.ts";
import { newHeaders, type MsgHdrs, type NatsConnection } from "../nats/connection.ts";
import { flushSinks, NatsSpanSink, RatePicker, SINK_MARK } from "./span-sink.ts";
import { recordSpansLost } from "./metrics.ts";
import { SpanLossLog, type SpanLoss } from "./span-loss.ts";
import { CountedBatchProcessor, otlpExporter } from "./span-export.ts";
import { batchSettings, envValue, hadisSwitch, otlpProtocolFromEnv, otlpUrlFromEnv, samplerFromEnv, type OtlpProtocol } from "./config.ts";

export { SpanKind, SpanStatusCode };
export { RatePicker, spanSinkCount, toSpanRecord, type SpanRecord } from "./span-sink.ts";
export { batchSettings, otlpUrlFromEnv, samplerFromEnv, samplerNamed, type OtlpProtocol } from "./config.ts";
export type { Attributes, Context, Link, Span, SpanContext };
/**
 * Epoch milliseconds on the clock spans start by (the SDK's: `Date.now()`): times a span of
 * another service starts at (an item's enqueue, a batch's start) are read from it, so no child
 * starts before its parent.
 */
export const spanClockMs = (): number => Date.now();

/** Subject on which services publish finished spans for the local dashboard (one msgpack array of SpanRecord per message). */
export const spanSinkSubject = (prefix = "hadis") => buildSubjects(prefix).telemetrySpans;

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

const log = createLogger("telemetry");
/** Spans the OTLP export loses, in this process's log at a bounded rate (the metrics count them too). */
const lossLog = new SpanLossLog(log);
const onLoss = (reason: SpanLoss, spans: number) => {
  recordSpansLost(reason, spans);
  lossLog.report(reason, spans, Date.now());
};

/** Telemetry faults other than lost spans (a tracer that could not be built): the first of each kind logged, then one line a minute at most. */
const faultLoggedMs = new Map<string, number>();
function reportFault(event: string, err: unknown): void {
  const now = Date.now();
  if (now - (faultLoggedMs.get(event) ?? -Infinity) < 60_000) return;
  faultLoggedMs.set(event, now);
  log.warn(event, { error: (err as Error)?.message ?? String(err) });
}

function fromEnv(): TelemetryOptions {
  const env = process.env;
  if (envValue(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return { enabled: false };
  const otlpUrl = envValue(env, "OTEL_TRACES_EXPORTER")?.toLowerCase() === "none" ? null : otlpUrlFromEnv(env);
  const hadis = hadisSwitch(env, "HADIS_TRACING");
  const enabled = hadis === "on" || (hadis !== "off" && otlpUrl !== null);
  const sink = hadisSwitch(env, "HADIS_SPAN_SINK");
  const rate = envValue(env, "HADIS_SPAN_SINK_RATE")?.toLowerCase();
  const perSecond = rate === undefined ? undefined : rate === "all" ? Infinity : Number(rate);
  return {
    enabled,
    otlpUrl,
    // Unset: on whenever tracing is (`configureTelemetry`'s default), whoever turns tracing on.
    ...(sink === undefined ? {} : { spanSink: sink === "on" }),
    ...(perSecond !== undefined && perSecond >= 0 ? { sinkTracesPerSecond: perSecond } : {}),
  };
}

/**
 * A processor standing in for an OTLP export that could not be built from the configuration
 * (`hadis start` refuses such a configuration first; a library caller may not): every sampled span
 * it is given counts as lost, so the fault shows in the metrics and the log, not on the request path.
 */
class UnavailableExport implements SpanProcessor {
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    if (span.spanContext().traceFlags & TraceFlags.SAMPLED) onLoss("exporter_unavailable", 1);
  }
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

/**
 * Configures tracing for this process (replaces any earlier configuration; services pick it up at
 * their next request). Without a call, the environment decides at first use. Never throws for an
 * OTLP endpoint it cannot use: the export's spans are counted as lost instead.
 */
export function configureTelemetry(opts: TelemetryOptions = {}): void {
  const previous = state;
  const env = fromEnv();
  const enabled = opts.enabled ?? env.enabled ?? false;
  const otlpUrl = opts.otlpUrl === undefined ? (env.otlpUrl ?? null) : opts.otlpUrl;
  const shared: SpanProcessor[] = [];
  if (enabled && otlpUrl) {
    try {
      shared.push(new CountedBatchProcessor(otlpExporter(otlpUrl, opts.otlpProtocol ?? otlpProtocolFromEnv()), batchSettings(), onLoss));
    } catch (err) {
      log.error("telemetry.exporter_failed", {
        url: otlpUrl,
        error: (err as Error).message,
        effect: "no span is exported; requests are served as usual",
      });
      shared.push(new UnavailableExport());
    }
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
  return envValue(process.env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true" || hadisSwitch(process.env, "HADIS_TRACING") === "off";
}

/** Flushes every exporter (tests, shutdown). */
export async function flushTelemetry(): Promise<void> {
  const s = current();
  await Promise.all([...s.shared.map((p) => p.forceFlush()), flushSinks()]);
}

/** Flushes and stops the exporters; tracing is off afterwards. */
export async function shutdownTelemetry(): Promise<void> {
  await flushTelemetry().catch(() => undefined);
  const s = current();
  await Promise.all(s.shared.map((p) => p.shutdown().catch(() => undefined)));
  state = { ...s, enabled: false, spanSink: false, shared: [], generation: s.generation + 1 };
}

/** What a service's sampler adds to the configured one. */
interface SamplerRules {
  /** Root spans of this name get the sink mark when `pick` says so (any other mark they carry is dropped). */
  mark?: { name: string; pick: () => boolean };
  /** Only traces with the sink mark are recorded (the sink is the only consumer of spans). */
  recordOnlyMarked: boolean;
}

/**
 * The configured sampler, plus three rules of ours: a new trace linked to sampled spans (a
 * worker's batch of traced items) is sampled when the configured sampler is parent-based (else
 * its links would point at spans never exported); the router's picked request roots get the sink
 * mark in their `tracestate`; and with no exporter, traces without the mark are not recorded.
 */
class ServiceSampler implements Sampler {
  constructor(
    private readonly inner: Sampler,
    private readonly rules: SamplerRules,
  ) {}

  shouldSample(context: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    const parent = trace.getSpanContext(context);
    const hasParent = parent !== undefined && isSpanContextValid(parent);
    let result = this.inner.shouldSample(context, traceId, name, kind, attributes, links);
    if (
      !hasParent &&
      result.decision !== SamplingDecision.RECORD_AND_SAMPLED &&
      this.inner instanceof ParentBasedSampler &&
      links.some((l) => (l.context.traceFlags & TraceFlags.SAMPLED) !== 0)
    ) {
      result = { decision: SamplingDecision.RECORD_AND_SAMPLED };
    }
    let traceState = result.traceState ?? (hasParent ? parent.traceState : undefined);
    const mark = this.rules.mark;
    if (mark && name === mark.name) {
      // Only the picker marks: a mark a caller sent in its own tracestate is dropped.
      if (result.decision === SamplingDecision.RECORD_AND_SAMPLED && mark.pick())
        traceState = (traceState ?? createTraceState()).set(SINK_MARK.key, SINK_MARK.value);
      else if (traceState?.get(SINK_MARK.key) !== undefined) traceState = traceState.unset(SINK_MARK.key);
    }
    if (this.rules.recordOnlyMarked && traceState?.get(SINK_MARK.key) !== SINK_MARK.value) {
      return { decision: SamplingDecision.NOT_RECORD, ...(traceState ? { traceState } : {}) };
    }
    return { ...result, ...(traceState ? { traceState } : {}) };
  }

  toString(): string {
    return this.inner.toString();
  }
}

/** NATS headers as the W3C propagator reads and writes them. */
const headerGetter: TextMapGetter<(name: string) => string | undefined> = { get: (lookup, key) => lookup(key), keys: () => [] };
const headerSetter: TextMapSetter<MsgHdrs> = { set: (headers, key, value) => headers.set(key, value) };
const propagator = new W3CTraceContextPropagator();
/** A span that records nothing (telemetry that failed answers with it, never with an error). */
const NOT_TRACED = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** One service's tracing: a tracer provider named after it and the NATS header propagation. */
export class ServiceTelemetry {
  private tracerOf: { generation: number; tracer: Tracer } | null = null;
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

  /** The tracer (rebuilt after a reconfiguration; a no-op one, reported, if it cannot be built). */
  get tracer(): Tracer {
    const s = current();
    if (this.tracerOf?.generation !== s.generation) {
      let tracer: Tracer;
      try {
        if (this.nc && !this.sink) this.sink = new NatsSpanSink(this.nc, spanSinkSubject(s.subjectPrefix), () => current().spanSink);
        const picker = new RatePicker(s.sinkTracesPerSecond);
        const sampler = new ServiceSampler(s.sampler, {
          ...(this.sinkRoot && s.spanSink ? { mark: { name: this.sinkRoot, pick: () => picker.pick() } } : {}),
          // No exporter: the sink's traces are the only ones anybody reads.
          recordOnlyMarked: s.shared.length === 0,
        });
        const provider = new BasicTracerProvider({
          resource: serviceResource(this.serviceName, this.instanceId),
          sampler,
          spanProcessors: [...s.shared, ...(this.sink ? [this.sink] : [])],
        });
        tracer = provider.getTracer(this.serviceName);
      } catch (err) {
        reportFault("telemetry.tracer_failed", err);
        tracer = trace.getTracerProvider().getTracer(this.serviceName);
      }
      this.tracerOf = { generation: s.generation, tracer };
    }
    return this.tracerOf.tracer;
  }

  /** Starts a span under `parent` (a span context, from this process or extracted; none for a new trace). */
  start(name: string, options: SpanOptions, parent?: SpanContext): Span {
    try {
      return this.tracer.startSpan(name, options, parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT);
    } catch (err) {
      reportFault("telemetry.span_failed", err);
      return NOT_TRACED;
    }
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
    return this.extractWith((name) => headers.get(name) || undefined);
  }

  /** The span context read through a header lookup (e.g. a queue delivery's headers), as the W3C propagator reads it. */
  extractWith(header: (name: string) => string | undefined): SpanContext | undefined {
    const context = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, header, headerGetter));
    return context && isSpanContextValid(context) ? context : undefined;
  }

  /** Headers carrying `parent` as `traceparent` (and `tracestate`), written into `headers` when given. */
  inject(parent: SpanContext, headers: MsgHdrs = newHeaders()): MsgHdrs {
    propagator.inject(trace.setSpanContext(ROOT_CONTEXT, parent), headers, headerSetter);
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
    .merge(
      resourceFromAttributes({
        [ATTR_SERVICE_NAME]: process.env.OTEL_SERVICE_NAME ? `${process.env.OTEL_SERVICE_NAME}.${serviceName}` : serviceName,
        ...(instanceId ? { "service.instance.id": instanceId } : {}),
      }),
    );
}

/** A messaging operation on NATS, as the messaging semantic conventions describe it on a span. */
export interface MessagingOperation {
  /** `messaging.operation.type`: send (publish, request), receive (pull), process (handle). */
  type: "send" | "receive" | "process";
  /** `messaging.operation.name`: the system's own name of it (publish, fetch, ack, …). */
  name: string;
  /** The subject; omitted for a reply inbox, which is temporary (`messaging.destination.temporary`). */
  destination?: string;
  /** The queue group or JetStream consumer sharing the subject's messages. */
  consumerGroup?: string;
  /** The message id (a work item's `Nats-Msg-Id`). */
  messageId?: string;
  /** Messages in a batch. */
  batchCount?: number;
}

/** The messaging semantic-convention attributes (`messaging.system=nats`, …) of an operation. */
export function messagingAttributes(op: MessagingOperation): Attributes {
  return {
    [ATTR_MESSAGING_SYSTEM]: "nats",
    [ATTR_MESSAGING_OPERATION_TYPE]: op.type,
    [ATTR_MESSAGING_OPERATION_NAME]: op.name,
    ...(op.destination === undefined
      ? { [ATTR_MESSAGING_DESTINATION_TEMPORARY]: true }
      : { [ATTR_MESSAGING_DESTINATION_NAME]: op.destination }),
    ...(op.consumerGroup ? { [ATTR_MESSAGING_CONSUMER_GROUP_NAME]: op.consumerGroup } : {}),
    ...(op.messageId ? { [ATTR_MESSAGING_MESSAGE_ID]: op.messageId } : {}),
    ...(op.batchCount !== undefined ? { [ATTR_MESSAGING_BATCH_MESSAGE_COUNT]: op.batchCount } : {}),
  };
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
