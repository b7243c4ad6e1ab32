/**
 * HTTP around the gateway's routes: reading a bounded JSON body, choosing between a JSON and a
 * PNG answer, and putting a reply's fields and a typed error on HTTP (status, `Retry-After`, the
 * same error body as on NATS).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { asHadisError, HadisError, toWireError } from "../../contracts/errors.ts";
import { encodeJson } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, type GenerateReplyRead } from "../../contracts/messages.ts";

/** Headers on every answer. */
export const BASE_HEADERS = { "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store" } as const;

/**
 * Reads a request body of at most `maxBytes` and parses it as JSON (whatever its `Content-Type`:
 * `curl -d` sends form encoding). Too large: `payload_too_large` (413), as soon as the declared or
 * received length passes the limit; empty or not JSON: `malformed_payload` (400).
 */
export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const declared = Number(req.headers["content-length"] ?? NaN);
  const tooLarge = (bytes: number) => new HadisError("payload_too_large", `request body of ${bytes} bytes exceeds ${maxBytes}`);
  if (declared > maxBytes) throw tooLarge(declared);
  const chunks: Buffer[] = [];
  let received = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    received += chunk.length;
    if (received > maxBytes) throw tooLarge(received);
    chunks.push(chunk);
  }
  if (received === 0)
    throw new HadisError("malformed_payload", 'empty request body: send the request as JSON, e.g. {"prompt":"a red bicycle"}');
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks)));
  } catch (err) {
    throw new HadisError("malformed_payload", `request body is not valid JSON: ${(err as Error).message}`, {}, { cause: err });
  }
}

/**
 * The quality an `Accept` header gives `type`: that of its most specific matching range (the type
 * itself, then `major/*`, then `*\/*`), 0 when none matches; no header accepts anything.
 */
export function acceptQuality(accept: string | undefined, type: string): number {
  if (!accept) return 1;
  const ranges = [type, `${type.split("/")[0]}/*`, "*/*"];
  let best = { specificity: -1, q: 0 };
  for (const part of accept.split(",")) {
    const [range, ...params] = part.split(";").map((x) => x.trim().toLowerCase());
    const specificity = ranges.length - 1 - ranges.indexOf(range);
    if (specificity > ranges.length - 1) continue; // (indexOf -1: not a match)
    const qParam = params.find((p) => p.startsWith("q="));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (specificity > best.specificity) best = { specificity, q: Number.isFinite(q) ? q : 0 };
  }
  return best.q;
}

/** Whether an `Accept` header prefers the PNG to JSON (JSON wins ties, and is the default). */
export function wantsPng(accept: string | undefined): boolean {
  const png = acceptQuality(accept, "image/png");
  return png > 0 && png > acceptQuality(accept, "application/json");
}

/** `requestId` → `X-Hadis-Request-Id`. */
export function headerNameOf(field: string): string {
  return `X-Hadis-${field
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .replace(/^./, (c) => c.toUpperCase())
    .replace(/-([a-z])/g, (_, c: string) => `-${c.toUpperCase()}`)}`;
}

/** A header value from any field value: text as is, objects as JSON; characters outside printable ASCII percent-encoded (a header cannot carry them). */
export function headerValueOf(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.replace(/[^\x20-\x7e]|%/g, (c) => encodeURIComponent(c));
}

/** Every field of a reply but its image, as `X-Hadis-*` headers (the PNG answer's metadata). */
export function replyHeaders(reply: GenerateReplyRead): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [field, value] of Object.entries(reply)) {
    if (field === "image" || field === "v" || value === undefined) continue;
    headers[headerNameOf(field)] = headerValueOf(value);
  }
  return headers;
}

/** Sends a reply: the PNG with its fields in headers, or the JSON reply with the image base64-encoded. */
export function sendReply(res: ServerResponse, reply: GenerateReplyRead, png: boolean, extra: Record<string, string> = {}): void {
  if (png) {
    res
      .writeHead(200, {
        ...BASE_HEADERS,
        ...extra,
        "Content-Type": "image/png",
        "Content-Length": String(reply.image.byteLength),
        ...replyHeaders(reply),
      })
      .end(Buffer.from(reply.image));
    return;
  }
  sendJson(res, 200, reply, extra);
}

/** Sends a JSON body (byte arrays as base64). */
export function sendJson(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  const data = encodeJson(body);
  res
    .writeHead(status, { ...BASE_HEADERS, ...extra, "Content-Type": "application/json", "Content-Length": String(data.byteLength) })
    .end(data);
}

/**
 * Sends a typed error: its status (400, 404, 413, 429, 503, 504, …) and the same body a NATS
 * caller gets; `Retry-After` (whole seconds, at least 1) when it says when to retry.
 */
export function sendError(res: ServerResponse, err: unknown, extra: Record<string, string> = {}): void {
  const e = asHadisError(err);
  if (res.headersSent) {
    res.destroy(e);
    return;
  }
  const retryAfterMs =
    typeof e.details.retryAfterMs === "number" ? e.details.retryAfterMs : e.code === "too_many_requests" ? 1_000 : undefined;
  const retry: Record<string, string> =
    retryAfterMs !== undefined ? { "Retry-After": String(Math.max(1, Math.ceil(retryAfterMs / 1_000))) } : {};
  sendJson(res, e.status, toWireError(e, PROTOCOL_VERSION), { ...extra, ...retry });
}
