/**
 * Answering over NATS: micro services, replies in the caller's encoding, and typed errors in the
 * service error headers; the `max_payload` checks that keep an image reply from failing unsaid.
 */
import { headers as natsHeaders, type Msg, type MsgHdrs } from "@nats-io/nats-core";
import { Svcm, type Service, type ServiceConfig, type ServiceMsg } from "@nats-io/services";
import { ContentTypes, Headers } from "../../contracts/subjects.ts";
import { asHadisError, HadisError, toWireError } from "../../contracts/errors.ts";
import { encodeAs, looksLikeJson, MAX_PAYLOAD_BYTES, type Encoding } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { headerOf, type NatsConnection } from "./connection.ts";

/**
 * What an endpoint's whole handling took, which nats.js cannot see: it times a handler's
 * synchronous part and counts only what it throws, so an asynchronous handler (a generation of
 * seconds, an error reply sent later) read as taking a few ms and never failing.
 */
export class HandlingTally {
  /** Handlings that ended. */
  ended = 0;
  /** Of those, the ones answered with an error reply. */
  errors = 0;
  /** The last error reply, as `code: message`. */
  lastError: string | undefined;
  /** Summed time of the ended handlings, ns. */
  processingNs = 0;

  /** Starts timing one handling; call what it returns once, with the error it was answered with, if any. */
  begin(): (error?: unknown) => void {
    const startedMs = performance.now();
    return (error) => {
      this.ended++;
      this.processingNs += Math.round((performance.now() - startedMs) * 1e6);
      if (error !== undefined) {
        this.errors++;
        const e = asHadisError(error);
        this.lastError = `${e.code}: ${e.message}`;
      }
    };
  }

  /**
   * Writes the figures over the ones nats.js keeps for `endpoint` (what `$SRV.STATS` reports):
   * its request count stays (requests taken in, counted as each arrives), the errors, last error
   * and processing times become the whole handling's.
   */
  report(endpoint: unknown): void {
    const stats = (endpoint as { stats?: Record<string, unknown> }).stats;
    // (nats.js keeps them on the endpoint's `stats`, not a public field: checked rather than assumed.)
    if (!stats || typeof stats.num_errors !== "number" || typeof stats.processing_time !== "number") return;
    stats.num_errors = this.errors;
    stats.last_error = this.lastError;
    stats.processing_time = this.processingNs;
    stats.average_processing_time = this.ended > 0 ? Math.round(this.processingNs / this.ended) : 0;
  }
}

/**
 * Starts a NATS micro service (answers `$SRV.PING|INFO|STATS`). `tallies` names the endpoints
 * whose handling is asynchronous, with what times it: their `$SRV.STATS` figures are those.
 */
export async function startService(
  nc: NatsConnection,
  config: ServiceConfig,
  tallies: Record<string, HandlingTally> = {},
): Promise<Service> {
  if (Object.keys(tallies).length === 0) return new Svcm(nc).add(config);
  const data = config.statsHandler;
  return new Svcm(nc).add({
    ...config,
    statsHandler: async (endpoint) => {
      const tally = tallies[(endpoint as { name?: string }).name ?? ""];
      tally?.report(endpoint);
      return data ? data(endpoint) : undefined;
    },
  });
}

/**
 * The encoding of a request, read and answered in: the one its `Content-Type` names (the header's
 * name in any case); without one of ours, JSON when the body reads as a JSON object, else msgpack.
 */
export function requestEncoding(msg: Pick<Msg, "headers" | "data">): Encoding {
  const ct = headerOf(msg.headers, Headers.contentType).trim().toLowerCase();
  if (ct.startsWith(ContentTypes.json)) return "json";
  if (ct.startsWith(ContentTypes.msgpack)) return "msgpack";
  return looksLikeJson(msg.data) ? "json" : "msgpack";
}

/** A reply's headers: its encoding, and `Hadis-Final` when the caller asked for a preview (`final` given). */
function contentHeaders(encoding: Encoding, final?: boolean): MsgHdrs {
  const h = natsHeaders();
  h.set(Headers.contentType, encoding === "json" ? ContentTypes.json : ContentTypes.msgpack);
  if (final !== undefined) h.set(Headers.final, String(final));
  return h;
}

/**
 * Replies with a message in the caller's encoding. `final` (a request that asked for a preview,
 * whose caller reads several messages) is said in the `Hadis-Final` header.
 */
export function replyWith(msg: Msg, body: unknown, encoding: Encoding, final?: boolean): boolean {
  if (!msg.reply) return false;
  const data = encodeAs(body, encoding);
  try {
    return msg.respond(data, { headers: contentHeaders(encoding, final) });
  } catch (err) {
    throw isPayloadTooLarge(err) ? payloadTooLarge("the reply", data.byteLength) : err;
  }
}

/** Whether `err` is the client library refusing a message over the server's `max_payload`. */
export function isPayloadTooLarge(err: unknown): boolean {
  return err instanceof Error && /max_payload size exceeded/.test(err.message);
}

/** The typed error for a message over the server's `max_payload`, saying what to change. */
export function payloadTooLarge(what: string, bytes: number): HadisError {
  return new HadisError(
    "payload_too_large",
    `${what} is ${bytes} bytes, over the NATS server's max_payload: set max_payload to ${MAX_PAYLOAD_BYTES} (8 MiB) in its config, as the embedded server and ops/nats/*.conf do`,
  );
}

/** A warning when the server's `max_payload` is below what images need (a stock nats-server allows 1 MiB; a 1024² PNG is often more). */
export function maxPayloadWarning(nc: NatsConnection): string | null {
  const max = nc.info?.max_payload;
  return max !== undefined && max < MAX_PAYLOAD_BYTES
    ? `the NATS server's max_payload is ${max} bytes, under the ${MAX_PAYLOAD_BYTES} images may need: larger images and replies fail with payload_too_large (set max_payload: ${MAX_PAYLOAD_BYTES} in its config)`
    : null;
}

/**
 * Replies with a typed error: `Nats-Service-Error` / `Nats-Service-Error-Code` headers and the
 * typed error body in the caller's encoding; `Hadis-Final: true` with `final` (an error ends a
 * request that asked for a preview as a reply does).
 */
export function replyError(msg: Msg | ServiceMsg, err: unknown, encoding: Encoding, final?: true): boolean {
  if (!msg.reply) return false;
  const e = asHadisError(err);
  const body = encodeAs(toWireError(e, PROTOCOL_VERSION), encoding);
  const h = contentHeaders(encoding, final);
  // A message may quote what the caller sent; a header value may not hold CR or LF (the body keeps them).
  const text = `${e.code}: ${e.message}`.replace(/[\r\n]+/g, " ");
  if ("respondError" in msg) return msg.respondError(e.status, text, body, { headers: h });
  h.set(Headers.serviceError, text);
  h.set(Headers.serviceErrorCode, String(e.status));
  return msg.respond(body, { headers: h });
}
