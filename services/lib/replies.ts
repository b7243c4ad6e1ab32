/**
 * Answering over NATS: micro services, replies in the caller's encoding, and typed errors in the
 * service error headers; the `max_payload` checks that keep an image reply from failing unsaid.
 */
import { headers as natsHeaders, type Msg, type MsgHdrs } from "@nats-io/nats-core";
import { Svcm, type Service, type ServiceConfig, type ServiceMsg } from "@nats-io/services";
import { ContentTypes, Headers } from "../../contracts/subjects.ts";
import { asHadisError, HadisError, toWireError } from "../../contracts/errors.ts";
import { encodeAs, MAX_PAYLOAD_BYTES, type Encoding } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import type { NatsConnection } from "./nats.ts";

/** Starts a NATS micro service (answers `$SRV.PING|INFO|STATS`). */
export async function startService(nc: NatsConnection, config: ServiceConfig): Promise<Service> {
  return new Svcm(nc).add(config);
}

/** The encoding a request asked for (JSON by `Content-Type`, msgpack otherwise). */
export function requestEncoding(msg: Msg): Encoding {
  const ct = msg.headers?.get(Headers.contentType) ?? "";
  return ct.toLowerCase().startsWith(ContentTypes.json) ? "json" : "msgpack";
}

function contentHeaders(encoding: Encoding): MsgHdrs {
  const h = natsHeaders();
  h.set(Headers.contentType, encoding === "json" ? ContentTypes.json : ContentTypes.msgpack);
  return h;
}

/** Replies with a message in the caller's encoding. */
export function replyWith(msg: Msg, body: unknown, encoding: Encoding): boolean {
  if (!msg.reply) return false;
  const data = encodeAs(body, encoding);
  try {
    return msg.respond(data, { headers: contentHeaders(encoding) });
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
  return new HadisError("payload_too_large", `${what} is ${bytes} bytes, over the NATS server's max_payload: set max_payload to ${MAX_PAYLOAD_BYTES} (8 MiB) in its config, as the embedded server and ops/nats/*.conf do`);
}

/** A warning when the server's `max_payload` is below what images need (a stock nats-server allows 1 MiB; a 1024² PNG is often more). */
export function maxPayloadWarning(nc: NatsConnection): string | null {
  const max = nc.info?.max_payload;
  return max !== undefined && max < MAX_PAYLOAD_BYTES ? `the NATS server's max_payload is ${max} bytes, under the ${MAX_PAYLOAD_BYTES} images may need: larger images and replies fail with payload_too_large (set max_payload: ${MAX_PAYLOAD_BYTES} in its config)` : null;
}

/**
 * Replies with a typed error: `Nats-Service-Error` / `Nats-Service-Error-Code` headers and the
 * typed error body in the caller's encoding.
 */
export function replyError(msg: Msg | ServiceMsg, err: unknown, encoding: Encoding): boolean {
  if (!msg.reply) return false;
  const e = asHadisError(err);
  const body = encodeAs(toWireError(e, PROTOCOL_VERSION), encoding);
  const h = contentHeaders(encoding);
  // A message may quote what the caller sent; a header value may not hold CR or LF (the body keeps them).
  const text = `${e.code}: ${e.message}`.replace(/[\r\n]+/g, " ");
  if ("respondError" in msg) return msg.respondError(e.status, text, body, { headers: h });
  h.set(Headers.serviceError, text);
  h.set(Headers.serviceErrorCode, String(e.status));
  return msg.respond(body, { headers: h });
}
