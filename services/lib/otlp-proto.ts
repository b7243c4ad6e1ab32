/**
 * OTLP protobuf encoding of finished spans, straight from the spans, one at a time, into
 * per-service buffers (`TraceRequestBuilder`). The OpenTelemetry serializer first converts every
 * span into a tree of plain objects and hands that to protobufjs: at a thousand requests a
 * second that conversion cost more CPU than the rest of tracing. This writes the same
 * `ExportTraceServiceRequest` (the tests decode both with the OTLP schema and compare).
 * `otlp-export.ts` sends it.
 */
import type { Attributes, AttributeValue, Link, SpanContext } from "@opentelemetry/api";
import type { InstrumentationScope } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { LeanSpan } from "./lean-tracer.ts";

const VARINT = 0;
const FIXED64 = 1;
const BYTES = 2;
const FIXED32 = 5;

/** Span flags: the trace flags, and whether the parent was remote (OTLP 1.x). */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

/** Hex digit values by character code (anything else reads as 0). */
const NIBBLE = new Uint8Array(128);
for (let d = 0; d < 16; d++) {
  NIBBLE["0123456789abcdef".charCodeAt(d)] = d;
  NIBBLE["0123456789ABCDEF".charCodeAt(d)] = d;
}

const varintSize = (v: number) => (v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5);

/** A protobuf writer: fields appended to one growing buffer; nested messages patched with their length. */
class Writer {
  private buf: Buffer;
  private pos = 0;
  private readonly starts: number[] = [];

  constructor(capacity: number) {
    this.buf = Buffer.allocUnsafe(Math.max(1_024, capacity));
  }

  get length(): number {
    return this.pos;
  }

  /** Empties the writer, keeping its buffer. */
  reset(): void {
    this.pos = 0;
    this.starts.length = 0;
  }

  /** Nested messages open now. */
  get depth(): number {
    return this.starts.length;
  }

  /** Drops what was written after `length` bytes with `depth` messages open (a write that failed half-way). */
  rollback(length: number, depth: number): void {
    this.pos = length;
    this.starts.length = depth;
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  private raw(v: number): void {
    // Non-negative integers below 2^53.
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.pos++] = v;
  }

  private tag(field: number, wire: number): void {
    this.room(16);
    this.raw(field * 8 + wire);
  }

  uint(field: number, v: number): void {
    this.tag(field, VARINT);
    this.raw(v);
  }

  /** An int64 varint: negative numbers take ten bytes (two's complement), as protobuf says. */
  int64(field: number, v: number): void {
    if (v >= 0 && v <= Number.MAX_SAFE_INTEGER) return this.uint(field, v);
    this.tag(field, VARINT);
    let u = BigInt.asUintN(64, BigInt(v));
    while (u >= 0x80n) {
      this.buf[this.pos++] = Number(u & 0x7fn) | 0x80;
      u >>= 7n;
    }
    this.buf[this.pos++] = Number(u);
  }

  double(field: number, v: number): void {
    this.tag(field, FIXED64);
    this.pos = this.buf.writeDoubleLE(v, this.pos);
  }

  fixed32(field: number, v: number): void {
    this.tag(field, FIXED32);
    this.pos = this.buf.writeUInt32LE(v >>> 0, this.pos);
  }

  /**
   * A time as fixed64 nanoseconds since the epoch, from whole seconds and nanoseconds, in two
   * 32-bit halves without BigInt: s·1e9 = (s·1953125)·2^9, and s·1953125 is exact below 2^53.
   */
  time(field: number, seconds: number, nanos: number): void {
    this.tag(field, FIXED64);
    const x = seconds * 1_953_125;
    let hi = Math.floor(x / 0x800000);
    let lo = (x - hi * 0x800000) * 512 + nanos;
    if (lo >= 0x100000000) {
      hi += Math.floor(lo / 0x100000000);
      lo %= 0x100000000;
    }
    this.pos = this.buf.writeUInt32LE(lo, this.pos);
    this.pos = this.buf.writeUInt32LE(hi, this.pos);
  }

  /** A time given as epoch milliseconds (fractional, as our spans keep them). */
  timeMs(field: number, ms: number): void {
    const seconds = Math.floor(ms / 1e3);
    this.time(field, seconds, Math.min(999_999_999, Math.round((ms - seconds * 1e3) * 1e6)));
  }

  string(field: number, s: string): void {
    // Short ASCII (names, keys, ids, models) is copied byte by byte: cheaper than a native call.
    if (s.length < 0x80) {
      this.room(3 + s.length);
      const at = this.pos;
      this.raw(field * 8 + BYTES);
      const lengthAt = this.pos++;
      let i = 0;
      for (; i < s.length; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        this.buf[this.pos++] = c;
      }
      if (i === s.length) {
        this.buf[lengthAt] = s.length;
        return;
      }
      this.pos = at;
    }
    const n = Buffer.byteLength(s);
    this.tag(field, BYTES);
    this.raw(n);
    this.room(n);
    this.pos += this.buf.write(s, this.pos, "utf8");
  }

  /** A trace or span id (lower-case hex, as the API makes and checks them) as bytes, decoded here: cheaper than a native call per id. */
  hex(field: number, id: string): void {
    const n = id.length >> 1;
    this.tag(field, BYTES);
    this.raw(n);
    this.room(n);
    for (let i = 0; i < n; i++) this.buf[this.pos++] = (NIBBLE[id.charCodeAt(2 * i)] << 4) | NIBBLE[id.charCodeAt(2 * i + 1)];
  }

  bytes(field: number, b: Uint8Array): void {
    this.tag(field, BYTES);
    this.raw(b.length);
    this.append(b);
  }

  /** Bytes as they are (an encoded field or fields). */
  append(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** Opens a nested message (one length byte reserved; `close` moves it when longer). */
  open(field: number): void {
    this.tag(field, BYTES);
    this.starts.push(this.pos++);
  }

  close(): void {
    const start = this.starts.pop()!;
    const length = this.pos - start - 1;
    const size = varintSize(length);
    if (size > 1) {
      this.room(size - 1);
      this.buf.copyWithin(start + size, start + 1, this.pos);
      this.pos += size - 1;
    }
    const end = this.pos;
    this.pos = start;
    this.raw(length);
    this.pos = end;
  }

  /** The bytes written so far (a view: valid until the next write or reset). */
  view(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }
}

function anyValue(w: Writer, field: number, v: AttributeValue | null | undefined): void {
  w.open(field);
  if (typeof v === "string") w.string(1, v);
  else if (typeof v === "boolean") w.uint(2, v ? 1 : 0);
  else if (typeof v === "number") Number.isInteger(v) ? w.int64(3, v) : w.double(4, v);
  else if (v instanceof Uint8Array) w.bytes(7, v);
  else if (Array.isArray(v)) {
    w.open(5);
    for (const x of v) anyValue(w, 1, x);
    w.close();
  }
  w.close();
}

/**
 * Encoded attributes, per key: its key field, and the encoded `KeyValue` of each value it has
 * taken while they are few (a model, a route, a batch size, a flag; spans repeat them over and
 * over); a key past `VALUES_PER_KEY` distinct values (a request id, a duration) is encoded each
 * time from then on.
 */
interface KeyCache {
  key: Uint8Array;
  values: Map<string | number | boolean, Uint8Array> | null;
}
const keyCaches = new Map<string, KeyCache>();
const VALUES_PER_KEY = 32;
const MAX_KEYS = 1_024;

/** The fields `w` wrote for `write`, copied out. */
function fieldsOf(write: (w: Writer) => void): Uint8Array {
  const w = new Writer(64);
  write(w);
  return new Uint8Array(w.view());
}

/** Keeps `value` under `key` while the map holds fewer than `MAX_KEYS`; returns it. */
function keep<V>(map: Map<string, V>, key: string, value: V): V {
  if (map.size < MAX_KEYS) map.set(key, value);
  return value;
}

// No closure on the hit path (`??` makes the value only on a miss): a closure a call (or a
// context for the variables a closure in a loop body captures) was most of the encoder's
// allocation, 6 kB a request.
const keyCache = (key: string): KeyCache => keyCaches.get(key) ?? keep(keyCaches, key, { key: fieldsOf((w) => w.string(1, key)), values: new Map() });

/** The encoded `KeyValue` of a value its key's cache lacks, kept while the key has had few values; past that the cache is dropped. */
function cachedValue(cache: KeyCache, v: string | number | boolean): Uint8Array | undefined {
  if (cache.values!.size >= VALUES_PER_KEY) {
    cache.values = null;
    return undefined;
  }
  const kv = fieldsOf((x) => (x.append(cache.key), anyValue(x, 2, v)));
  cache.values!.set(v, kv);
  return kv;
}

function attributes(w: Writer, field: number, attrs: Attributes): void {
  for (const key in attrs) {
    const v = attrs[key];
    const cache = keyCache(key);
    if (cache.values && (typeof v === "string" || typeof v === "number" || typeof v === "boolean")) {
      const kv = cache.values.get(v) ?? cachedValue(cache, v);
      if (kv) {
        w.bytes(field, kv);
        continue;
      }
    }
    w.open(field);
    w.append(cache.key);
    anyValue(w, 2, v);
    w.close();
  }
}

/** Span names as encoded `Span.name` fields (a service uses a handful); at most `MAX_KEYS` are kept. */
const nameFields = new Map<string, Uint8Array>();

function spanName(w: Writer, s: string): void {
  w.append(nameFields.get(s) ?? keep(nameFields, s, fieldsOf((x) => x.string(5, s))));
}

const flagsOf = (ctx: SpanContext | undefined, traceFlags: number) => (traceFlags & 0xff) | HAS_IS_REMOTE | (ctx?.isRemote ? IS_REMOTE : 0);

function link(w: Writer, l: Link): void {
  w.open(13);
  w.hex(1, l.context.traceId);
  w.hex(2, l.context.spanId);
  const state = l.context.traceState?.serialize();
  if (state) w.string(3, state);
  if (l.attributes) attributes(w, 4, l.attributes);
  if (l.droppedAttributesCount) w.uint(5, l.droppedAttributesCount);
  w.fixed32(6, flagsOf(l.context, l.context.traceFlags));
  w.close();
}

function span(w: Writer, s: ReadableSpan): void {
  const ctx = s.spanContext();
  w.open(2);
  w.hex(1, ctx.traceId);
  w.hex(2, ctx.spanId);
  const state = ctx.traceState?.serialize();
  if (state) w.string(3, state);
  if (s.parentSpanContext?.spanId) w.hex(4, s.parentSpanContext.spanId);
  spanName(w, s.name);
  w.uint(6, s.kind + 1); // OTLP's SpanKind counts UNSPECIFIED as 0
  if (s instanceof LeanSpan) {
    w.timeMs(7, s.startMs);
    w.timeMs(8, s.endMs);
  } else {
    w.time(7, s.startTime[0], s.startTime[1]);
    w.time(8, s.endTime[0], s.endTime[1]);
  }
  attributes(w, 9, s.attributes);
  if (s.droppedAttributesCount) w.uint(10, s.droppedAttributesCount);
  for (const e of s.events) {
    w.open(11);
    w.time(1, e.time[0], e.time[1]);
    w.string(2, e.name);
    if (e.attributes) attributes(w, 3, e.attributes);
    if (e.droppedAttributesCount) w.uint(4, e.droppedAttributesCount);
    w.close();
  }
  if (s.droppedEventsCount) w.uint(12, s.droppedEventsCount);
  for (const l of s.links) link(w, l);
  if (s.droppedLinksCount) w.uint(14, s.droppedLinksCount);
  w.open(15);
  if (s.status.message) w.string(2, s.status.message);
  if (s.status.code) w.uint(3, s.status.code);
  w.close();
  w.fixed32(16, flagsOf(s.parentSpanContext, ctx.traceFlags));
  w.close();
}

/** One resource and scope's spans, encoded as they come (each a `ScopeSpans.spans` field). */
interface Group {
  scope: InstrumentationScope;
  spans: Writer;
}

/** Scopes are grouped by name, version and schema (as the OpenTelemetry serializer does), the key kept per scope object. */
const scopeKeys = new WeakMap<InstrumentationScope, string>();

/**
 * Builds `ExportTraceServiceRequest`s span by span: each span is encoded when it is added, into
 * its resource and scope's group, so nothing holds the span afterwards; `take` wraps the groups
 * in their resource and scope messages and starts over.
 */
export class TraceRequestBuilder {
  private readonly groups = new Map<Resource, Map<string, Group>>();
  /** Spans added since the last `take`. */
  count = 0;

  add(s: ReadableSpan): void {
    let scopes = this.groups.get(s.resource);
    if (!scopes) this.groups.set(s.resource, (scopes = new Map()));
    const scope = s.instrumentationScope;
    let key = scopeKeys.get(scope);
    if (key === undefined) scopeKeys.set(scope, (key = `${scope.name}@${scope.version ?? ""}:${scope.schemaUrl ?? ""}`));
    let group = scopes.get(key);
    if (!group) scopes.set(key, (group = { scope, spans: new Writer(16_384) }));
    const [length, depth] = [group.spans.length, group.spans.depth];
    try {
      span(group.spans, s);
    } catch (err) {
      group.spans.rollback(length, depth);
      throw err;
    }
    this.count++;
  }

  /** The request of the spans added since the last call (grouped in order of first appearance). */
  take(): Uint8Array {
    let size = 0;
    for (const scopes of this.groups.values()) for (const g of scopes.values()) size += g.spans.length;
    const w = new Writer(size + 1_024);
    for (const [resource, scopes] of this.groups) {
      let any = false;
      for (const g of scopes.values()) any ||= g.spans.length > 0;
      if (!any) continue;
      w.open(1);
      w.open(1);
      attributes(w, 1, resource.attributes);
      w.close();
      for (const g of scopes.values()) {
        if (g.spans.length === 0) continue;
        w.open(2);
        w.open(1);
        w.string(1, g.scope.name);
        if (g.scope.version) w.string(2, g.scope.version);
        w.close();
        w.append(g.spans.view());
        g.spans.reset();
        if (g.scope.schemaUrl) w.string(3, g.scope.schemaUrl);
        w.close();
      }
      if (resource.schemaUrl) w.string(3, resource.schemaUrl);
      w.close();
    }
    this.count = 0;
    return w.view(); // a writer of its own: nothing writes to it again
  }
}

/** Encodes spans as an OTLP `ExportTraceServiceRequest`, grouped by resource and scope. */
export function encodeTraceRequest(spans: readonly ReadableSpan[]): Uint8Array {
  const builder = new TraceRequestBuilder();
  for (const s of spans) builder.add(s);
  return builder.take();
}
