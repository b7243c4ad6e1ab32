/**
 * A lean OpenTelemetry `Tracer` for the request path. The SDK's tracer validates every id with
 * regular expressions, sanitises every attribute, asks the sampler about every child span and
 * reads two clocks per timestamp: at a thousand requests a second of eight spans each that was
 * a fifth of the pipeline's CPU time. This one trusts what it made itself (ids are built valid,
 * attributes come from our own code), decides a child span from its parent's sampled flag when
 * the configured sampler is parent-based (the default, and what that sampler would answer), and
 * reads one clock. Its spans are `ReadableSpan`s, so the SDK's processors and exporters (batch,
 * OTLP, in-memory) take them unchanged; the configured sampler still decides every root span.
 */
import { randomFillSync } from "node:crypto";
import {
  context as otelContext,
  createTraceState,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type AttributeValue,
  type Context,
  type Exception,
  type HrTime,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type Tracer,
} from "@opentelemetry/api";
import type { InstrumentationScope } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import { SamplingDecision, type ReadableSpan, type Sampler, type SpanProcessor, type TimedEvent } from "@opentelemetry/sdk-trace-base";

const pool = Buffer.allocUnsafe(4_096);
let poolAt = pool.length;

const INVALID_TRACE_ID = "0".repeat(32);
const INVALID_SPAN_ID = "0".repeat(16);

/** `bytes` random bytes as lower-case hex, never all zeros (W3C: an all-zero id is invalid). */
function randomHexId(bytes: 8 | 16): string {
  if (poolAt + bytes > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const id = pool.toString("hex", poolAt, (poolAt += bytes));
  return id === INVALID_SPAN_ID || id === INVALID_TRACE_ID ? randomHexId(bytes) : id;
}

// Shared until a span writes its own: most spans have no events, links or status.
const NO_EVENTS: TimedEvent[] = [];
const NO_LINKS: Link[] = [];
const UNSET: SpanStatus = { code: SpanStatusCode.UNSET };

/*
 * The clock of spans: epoch milliseconds at the monotonic clock's resolution, checked against
 * `Date.now()` every second and re-anchored to it when it has left the wall clock's current
 * millisecond, so it does not drift away from the wall-clock times other code passes in (from
 * this host or another). Between corrections it never steps back: the enqueue time a router
 * stamps after its stage span starts is not earlier than that start. A span that starts and ends
 * on its own takes its duration from the monotonic clock alone.
 */
export class SpanClock {
  private anchorWall: number;
  private anchorPerf: number;
  private checkedPerf: number;

  constructor(private readonly wall: () => number = Date.now, private readonly perf: () => number = () => performance.now()) {
    this.anchorWall = wall();
    this.anchorPerf = this.checkedPerf = perf();
  }

  /** Epoch milliseconds now (fractional). */
  now(): number {
    const p = this.perf();
    if (p - this.checkedPerf > 1_000) {
      this.checkedPerf = p;
      const wall = this.wall();
      const reading = this.anchorWall + (p - this.anchorPerf);
      if (reading < wall || reading >= wall + 1) {
        this.anchorWall = wall;
        this.anchorPerf = p;
      }
    }
    return this.anchorWall + (p - this.anchorPerf);
  }

  /** Epoch milliseconds of a `performance.now()` reading. */
  fromPerf(p: number): number {
    return this.anchorWall + (p - this.anchorPerf);
  }
}

const clock = new SpanClock();

/** Epoch milliseconds now (fractional), on the clock spans start and end by. */
export function nowMs(): number {
  return clock.now();
}

/**
 * Epoch milliseconds of an OpenTelemetry time input. Numbers below 1e12 (2001) are
 * `performance.now()` readings; the SDK's cut, this process's start, misreads an epoch time from
 * another host that predates it (an item enqueued before this worker started).
 */
function epochMs(t: TimeInput | undefined): number {
  if (t === undefined) return nowMs();
  if (typeof t === "number") return t < 1e12 ? clock.fromPerf(t) : t;
  if (t instanceof Date) return t.getTime();
  return t[0] * 1e3 + t[1] / 1e6;
}

/** Milliseconds as an OpenTelemetry `HrTime` ([seconds, nanoseconds]). */
function hrTime(ms: number): HrTime {
  const s = Math.floor(ms / 1e3);
  return [s, Math.min(999_999_999, Math.round((ms - s * 1e3) * 1e6))];
}

function setValue(attributes: Attributes, key: string, value: AttributeValue | undefined | null): void {
  if (value !== undefined && value !== null) attributes[key] = value;
}

/** A recording span: the API's `Span` to the code that writes it, the SDK's `ReadableSpan` to processors. */
export class LeanSpan implements Span, ReadableSpan {
  events: TimedEvent[] = NO_EVENTS;
  status: SpanStatus = UNSET;
  /** End, epoch ms (fractional); the start while the span runs. */
  endMs: number;
  ended = false;

  constructor(
    private readonly owner: LeanTracer,
    private readonly ctx: SpanContext,
    public name: string,
    readonly kind: SpanKind,
    readonly parentSpanContext: SpanContext | undefined,
    readonly attributes: Attributes,
    public links: Link[],
    /** Start, epoch ms (fractional). */
    readonly startMs: number,
    /** `performance.now()` at the start, when the start was not given: the duration's base. */
    private readonly perfStart?: number,
  ) {
    this.endMs = startMs;
  }

  // Nothing is dropped: on the prototype, not in every span.
  get droppedAttributesCount(): number {
    return 0;
  }
  get droppedEventsCount(): number {
    return 0;
  }
  get droppedLinksCount(): number {
    return 0;
  }

  // Exporters read these; the local sink reads the milliseconds.
  get startTime(): HrTime {
    return hrTime(this.startMs);
  }
  get endTime(): HrTime {
    return this.ended ? hrTime(this.endMs) : [0, 0];
  }
  get duration(): HrTime {
    return hrTime(this.endMs - this.startMs);
  }

  get resource(): Resource {
    return this.owner.resource;
  }
  get instrumentationScope(): InstrumentationScope {
    return this.owner.scope;
  }
  spanContext(): SpanContext {
    return this.ctx;
  }
  setAttribute(key: string, value: AttributeValue): this {
    if (!this.ended) setValue(this.attributes, key, value);
    return this;
  }
  setAttributes(attributes: Attributes): this {
    if (!this.ended) for (const key in attributes) setValue(this.attributes, key, attributes[key]);
    return this;
  }
  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    const timeGiven = typeof attributesOrTime === "number" || attributesOrTime instanceof Date || Array.isArray(attributesOrTime);
    const at = timeGiven ? (attributesOrTime as TimeInput) : time;
    if (this.events === NO_EVENTS) this.events = [];
    this.events.push({ name, time: hrTime(epochMs(at)), attributes: timeGiven ? {} : ((attributesOrTime as Attributes | undefined) ?? {}), droppedAttributesCount: 0 });
    return this;
  }
  addLink(link: Link): this {
    if (!this.ended) this.links = [...this.links, link];
    return this;
  }
  addLinks(links: Link[]): this {
    for (const l of links) this.addLink(l);
    return this;
  }
  setStatus(status: SpanStatus): this {
    // As the specification says: OK is final, and UNSET never overrides.
    // The message must be a string (exporters write it as one); the SDK drops any other.
    if (!this.ended && status.code !== SpanStatusCode.UNSET && this.status.code !== SpanStatusCode.OK) {
      this.status = typeof status.message === "string" ? { code: status.code, message: status.message } : { code: status.code };
    }
    return this;
  }
  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }
  recordException(exception: Exception, time?: TimeInput): void {
    const e = typeof exception === "string" ? { message: exception } : exception;
    this.addEvent("exception", { "exception.type": String(e.name ?? e.code ?? "Error"), "exception.message": String(e.message ?? ""), ...(e.stack ? { "exception.stacktrace": e.stack } : {}) }, time);
  }
  isRecording(): boolean {
    return !this.ended;
  }
  end(endTime?: TimeInput): void {
    if (this.ended) return;
    // An end before the start (clocks of two hosts) becomes a zero-length span, as in the SDK.
    const endMs = endTime === undefined && this.perfStart !== undefined ? this.startMs + (performance.now() - this.perfStart) : epochMs(endTime);
    this.endMs = Math.max(this.startMs, endMs);
    this.ended = true;
    this.owner.processor.onEnd(this);
  }
}

/** Marks the traces of some root spans (by name) with a `tracestate` member, when `pick` says so. */
export interface RootMark {
  name: string;
  key: string;
  value: string;
  pick: () => boolean;
}

/** What a `LeanTracer` needs. */
export interface LeanTracerOptions {
  resource: Resource;
  scope: InstrumentationScope;
  sampler: Sampler;
  /** The sampler answers a child span with its parent's sampled flag (a `parentbased_*` sampler): skip asking it. */
  parentBased: boolean;
  processor: SpanProcessor;
  mark?: RootMark;
  /**
   * Record only the spans of traces whose `tracestate` carries this member (when the only
   * consumer of spans is the dashboard's sink, which takes nothing else): the others are
   * non-recording, so a service neither builds nor propagates them.
   */
  recordOnly?: { key: string; value: string };
}

/** The tracer. */
export class LeanTracer implements Tracer {
  readonly resource: Resource;
  readonly scope: InstrumentationScope;
  readonly processor: SpanProcessor;

  constructor(private readonly opts: LeanTracerOptions) {
    this.resource = opts.resource;
    this.scope = opts.scope;
    this.processor = opts.processor;
  }

  startSpan(name: string, options: SpanOptions = {}, ctx: Context = otelContext.active()): Span {
    // The API's callers keep their attributes object: the span copies it.
    const own = options.attributes ? { ...options, attributes: { ...options.attributes } } : options;
    return this.startChild(name, own, options.root ? undefined : trace.getSpanContext(ctx), ctx);
  }

  /**
   * Starts a span under `parent` (a span context, none for a new trace): the request path's way,
   * without building a `Context` per span. `ctx` is what the sampler is shown, when it is asked.
   * The span takes `options.attributes` as its own (no copy): pass an object nobody else writes.
   */
  startChild(name: string, options: SpanOptions, parent: SpanContext | undefined, ctx?: Context): Span {
    const hasParent = parent !== undefined && parent.traceId !== INVALID_TRACE_ID && parent.spanId !== INVALID_SPAN_ID;
    const traceId = hasParent ? parent.traceId : randomHexId(16);
    const spanId = randomHexId(8);
    const kind = options.kind ?? SpanKind.INTERNAL;
    const attributes: Attributes = options.attributes ?? {};
    for (const key in attributes) if (attributes[key] === undefined || attributes[key] === null) delete attributes[key];
    const links = options.links && options.links.length > 0 ? [...options.links] : NO_LINKS;

    let sampled: boolean;
    let recording: boolean;
    let traceState = hasParent ? parent.traceState : undefined;
    if (hasParent && this.opts.parentBased) {
      sampled = recording = (parent.traceFlags & TraceFlags.SAMPLED) !== 0;
    } else if (!hasParent && this.opts.parentBased && links.some((l) => (l.context.traceFlags & TraceFlags.SAMPLED) !== 0)) {
      // A new trace linked to sampled spans (a worker's batch of traced items) is sampled too:
      // otherwise their links would point at a span never exported.
      sampled = recording = true;
    } else {
      const shown = ctx ? (options.root ? trace.deleteSpan(ctx) : ctx) : parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
      const result = this.opts.sampler.shouldSample(shown, traceId, name, kind, attributes, links);
      sampled = result.decision === SamplingDecision.RECORD_AND_SAMPLED;
      recording = result.decision !== SamplingDecision.NOT_RECORD;
      traceState = result.traceState ?? traceState;
      if (result.attributes) for (const key in result.attributes) setValue(attributes, key, result.attributes[key]);
    }
    const mark = this.opts.mark;
    if (mark && name === mark.name) {
      // Only the picker marks: a mark a caller sent in its own tracestate is dropped.
      if (sampled && mark.pick()) traceState = (traceState ?? createTraceState()).set(mark.key, mark.value);
      else if (traceState?.get(mark.key) !== undefined) traceState = traceState.unset(mark.key);
    }
    const only = this.opts.recordOnly;
    if (only && recording && traceState?.get(only.key) !== only.value) recording = false;
    const spanContext: SpanContext = { traceId, spanId, traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE };
    if (traceState) spanContext.traceState = traceState;
    if (!recording) return trace.wrapSpanContext(spanContext);
    const given = options.startTime;
    const span = new LeanSpan(this, spanContext, name, kind, hasParent ? parent : undefined, attributes, links, epochMs(given), given === undefined ? performance.now() : undefined);
    this.processor.onStart(span, ctx ?? ROOT_CONTEXT);
    return span;
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, options: SpanOptions, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, options: SpanOptions, ctx: Context, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, a: F | SpanOptions, b?: F | Context, c?: F): ReturnType<F> {
    const fn = (c ?? b ?? a) as F;
    const options = typeof a === "function" ? {} : a;
    const parent = c ? (b as Context) : otelContext.active();
    const span = this.startSpan(name, options, parent);
    return otelContext.with(trace.setSpan(parent, span), fn as (span: Span) => ReturnType<F>, undefined, span);
  }
}
