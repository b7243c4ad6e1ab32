/**
 * W3C trace context as it travels in NATS headers: `traceparent` read (and checked as the W3C
 * propagator checks it) and written, `tracestate` carried along. `telemetry.ts` injects and
 * extracts with these.
 */
import type { SpanContext } from "@opentelemetry/api";
import { parseTraceParent, TraceState } from "@opentelemetry/core";
import { Headers } from "../../contracts/subjects.ts";

/** The value of a lower-case hex digit's char code, -1 for any other. */
function hexValue(c: number): number {
  return c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : -1;
}

/** True when `s[from, to)` is lower-case hex with at least one non-zero digit. */
function nonZeroHex(s: string, from: number, to: number): boolean {
  let nonZero = false;
  for (let i = from; i < to; i++) {
    const v = hexValue(s.charCodeAt(i));
    if (v < 0) return false;
    if (v > 0) nonZero = true;
  }
  return nonZero;
}

/**
 * The ids and flags of a W3C `traceparent`, or null when it is not one: what OpenTelemetry's
 * `parseTraceParent` answers, without its regular expression for the common form (version, ids
 * and flags, 55 characters); any other length (surrounding space, a future version's extra
 * fields) goes to it.
 */
export function readTraceparent(value: string): { traceId: string; spanId: string; traceFlags: number } | null {
  if (value.length !== 55) return parseTraceParent(value);
  if (value.charCodeAt(2) !== 45 || value.charCodeAt(35) !== 45 || value.charCodeAt(52) !== 45) return null;
  const v0 = hexValue(value.charCodeAt(0));
  const v1 = hexValue(value.charCodeAt(1));
  const f0 = hexValue(value.charCodeAt(53));
  const f1 = hexValue(value.charCodeAt(54));
  if (v0 < 0 || v1 < 0 || (v0 === 15 && v1 === 15) || f0 < 0 || f1 < 0) return null;
  if (!nonZeroHex(value, 3, 35) || !nonZeroHex(value, 36, 52)) return null;
  return { traceId: value.slice(3, 35), spanId: value.slice(36, 52), traceFlags: f0 * 16 + f1 };
}

/**
 * The span context of the `traceparent` (and `tracestate`, read only then) that `header` looks up,
 * as the W3C propagator reads them, without building a `Context`.
 */
export function spanContextOf(header: (name: string) => string | undefined): SpanContext | undefined {
  const traceparent = header(Headers.traceparent);
  if (!traceparent) return undefined;
  const parsed = readTraceparent(traceparent);
  if (!parsed) return undefined;
  const context: SpanContext = { traceId: parsed.traceId, spanId: parsed.spanId, traceFlags: parsed.traceFlags, isRemote: true };
  const state = header(Headers.tracestate);
  if (state) context.traceState = new TraceState(state);
  return context;
}

/** The `traceparent` of a span context this process made or checked (version 00). */
export function traceparentOf(ctx: SpanContext): string {
  const flags = (ctx.traceFlags || 0) & 0xff;
  return `00-${ctx.traceId}-${ctx.spanId}-${flags < 16 ? "0" : ""}${flags.toString(16)}`;
}
