/**
 * OTLP/HTTP protobuf export of finished spans, encoded straight from the spans into one buffer.
 * The OpenTelemetry exporter first converts every span into a tree of plain objects and then
 * hands that to protobufjs: at a thousand requests a second that conversion and its garbage cost
 * more CPU than the rest of tracing. This writes the same `ExportTraceServiceRequest` (the tests
 * decode both with the OTLP schema and compare) and sends it with the exporter's own HTTP
 * transport, retries and `OTEL_EXPORTER_OTLP_*` configuration.
 */
import type { Attributes, AttributeValue, HrTime, Link, SpanContext } from "@opentelemetry/api";
import { OTLPExporterBase } from "@opentelemetry/otlp-exporter-base";
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from "@opentelemetry/otlp-exporter-base/node-http";
import { ProtobufTraceSerializer, type ISerializer, type IExportTraceServiceResponse } from "@opentelemetry/otlp-transformer";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";

const VARINT = 0;
const FIXED64 = 1;
const BYTES = 2;
const FIXED32 = 5;

/** Span flags: the trace flags, and whether the parent was remote (OTLP 1.x). */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

const varintSize = (v: number) => (v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5);

/** A protobuf writer: fields appended to one growing buffer; nested messages patched with their length. */
class Writer {
  private buf: Buffer;
  private pos = 0;
  private readonly starts: number[] = [];

  constructor(capacity: number) {
    this.buf = Buffer.allocUnsafe(Math.max(1_024, capacity));
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

  /** An OpenTelemetry time as fixed64 nanoseconds since the epoch. */
  time(field: number, t: HrTime): void {
    this.tag(field, FIXED64);
    this.pos = this.buf.writeBigUInt64LE(BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]), this.pos);
  }

  string(field: number, s: string): void {
    const n = Buffer.byteLength(s);
    this.tag(field, BYTES);
    this.raw(n);
    this.room(n);
    this.pos += this.buf.write(s, this.pos, "utf8");
  }

  /** A trace or span id (hex) as bytes. */
  hex(field: number, id: string): void {
    this.tag(field, BYTES);
    this.raw(id.length >> 1);
    this.room(id.length >> 1);
    this.pos += this.buf.write(id, this.pos, "hex");
  }

  bytes(field: number, b: Uint8Array): void {
    this.tag(field, BYTES);
    this.raw(b.length);
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

  finish(): Uint8Array {
    return new Uint8Array(this.buf.subarray(0, this.pos));
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

function attributes(w: Writer, field: number, attrs: Attributes): void {
  for (const key in attrs) {
    w.open(field);
    w.string(1, key);
    anyValue(w, 2, attrs[key]);
    w.close();
  }
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
  w.string(5, s.name);
  w.uint(6, s.kind + 1); // OTLP's SpanKind counts UNSPECIFIED as 0
  w.time(7, s.startTime);
  w.time(8, s.endTime);
  attributes(w, 9, s.attributes);
  if (s.droppedAttributesCount) w.uint(10, s.droppedAttributesCount);
  for (const e of s.events) {
    w.open(11);
    w.time(1, e.time);
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

/** Encodes spans as an OTLP `ExportTraceServiceRequest`, grouped by resource and scope. */
export function encodeTraceRequest(spans: readonly ReadableSpan[]): Uint8Array {
  const byResource = new Map<ReadableSpan["resource"], Map<string, ReadableSpan[]>>();
  for (const s of spans) {
    let scopes = byResource.get(s.resource);
    if (!scopes) byResource.set(s.resource, (scopes = new Map()));
    const scope = s.instrumentationScope;
    const key = `${scope.name}@${scope.version ?? ""}:${scope.schemaUrl ?? ""}`;
    const list = scopes.get(key);
    list ? list.push(s) : scopes.set(key, [s]);
  }
  const w = new Writer(spans.length * 320);
  for (const [resource, scopes] of byResource) {
    w.open(1);
    w.open(1);
    attributes(w, 1, resource.attributes);
    w.close();
    for (const list of scopes.values()) {
      const scope = list[0].instrumentationScope;
      w.open(2);
      w.open(1);
      w.string(1, scope.name);
      if (scope.version) w.string(2, scope.version);
      w.close();
      for (const s of list) span(w, s);
      if (scope.schemaUrl) w.string(3, scope.schemaUrl);
      w.close();
    }
    if (resource.schemaUrl) w.string(3, resource.schemaUrl);
    w.close();
  }
  return w.finish();
}

/** The serializer the exporter calls: our encoder out, the OTLP library's decoder for responses. */
const serializer: ISerializer<ReadableSpan[], IExportTraceServiceResponse> = {
  serializeRequest: (spans) => encodeTraceRequest(spans),
  deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
};

/** OTLP/HTTP protobuf trace exporter (the options and environment of the OpenTelemetry one). */
export class OtlpProtoTraceExporter extends OTLPExporterBase<ReadableSpan[]> {
  constructor(config: { url?: string } = {}) {
    super(createOtlpHttpExportDelegate(convertLegacyHttpOptions(config, "TRACES", "v1/traces", { "Content-Type": "application/x-protobuf" }), serializer));
  }
}
