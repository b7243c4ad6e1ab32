/**
 * `POST /v1/generate` answered as Server-Sent Events (`Accept: text/event-stream`): preview, then
 * upgrade over HTTP. The request goes on `hadis.generate` with `preview` (on unless the body says
 * false); a `preview` event carries the light image the judge rejected as soon as the router sends
 * it, then a `final` event the reply, or an `error` event the typed error in its place. Each
 * event's data is the JSON a plain `POST /v1/generate` answers with (image base64-encoded).
 */
import type { ServerResponse } from "node:http";
import { asHadisError, toWireError } from "../../contracts/errors.ts";
import { encodeJson } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, type GenerateRequest } from "../../contracts/messages.ts";
import { replyWaitMs, type HadisClient } from "../client/client.ts";
import type { MsgHdrs } from "../nats/connection.ts";
import { acceptQuality, BASE_HEADERS } from "./http.ts";

/** The events of a generate stream, in the order they come: at most one `preview`, then `final` or `error`. */
export const GenerateStreamEvents = { preview: "preview", final: "final", error: "error" } as const;

/** The headers of a Server-Sent Events answer (no buffering by a proxy: each event goes out as it comes). */
export const SSE_HEADERS = {
  ...BASE_HEADERS,
  "Content-Type": "text/event-stream; charset=utf-8",
  Connection: "keep-alive",
  "X-Accel-Buffering": "no",
} as const;

/** Whether an `Accept` header asks for Server-Sent Events over JSON (JSON wins ties, and is the default). */
export function wantsEventStream(accept: string | undefined): boolean {
  if (!accept) return false;
  const sse = acceptQuality(accept, "text/event-stream");
  return sse > 0 && sse > acceptQuality(accept, "application/json");
}

/** One Server-Sent Event whose data is `body` as JSON (one line: JSON escapes every newline). */
export function sseEvent(event: string, body: unknown): string {
  return `event: ${event}\ndata: ${Buffer.from(encodeJson(body)).toString("utf8")}\n\n`;
}

/**
 * Answers a checked request as a stream: 200 at once (the request was checked; a refusal from the
 * router is an `error` event), a comment every `keepaliveMs` while nothing else is written, and
 * the stream closed after `final` or `error`. A caller that leaves does not cancel the request.
 */
export async function streamGenerate(
  client: HadisClient,
  res: ServerResponse,
  request: GenerateRequest,
  opts: { headers?: MsgHdrs; keepaliveMs: number },
): Promise<void> {
  res.writeHead(200, SSE_HEADERS);
  res.write(": generating\n\n");
  const keepalive = setInterval(() => res.write(": keep-alive\n\n"), opts.keepaliveMs);
  try {
    const reply = await client.generate(
      { ...request, preview: request.preview ?? true },
      {
        timeoutMs: replyWaitMs(request),
        ...(opts.headers ? { headers: opts.headers } : {}),
        onPreview: (preview) => res.write(sseEvent(GenerateStreamEvents.preview, preview)),
      },
    );
    res.write(sseEvent(GenerateStreamEvents.final, reply));
  } catch (err) {
    res.write(sseEvent(GenerateStreamEvents.error, toWireError(asHadisError(err), PROTOCOL_VERSION)));
  } finally {
    clearInterval(keepalive);
    res.end();
  }
}
