/**
 * The msgpack envelope: encode a message, decode and validate one, with a protocol-version
 * check. JSON is the alternative encoding on the public subject.
 */
import { Packr } from "msgpackr";
import type { z } from "zod";
import { HadisError } from "./errors.ts";
import { PROTOCOL_VERSION } from "./messages.ts";
import type { RefusalParams } from "./prompt.ts";
import { senderOf } from "./subjects.ts";

/** Largest payload a service decodes, in bytes (NATS max_payload is set to match). */
export const MAX_PAYLOAD_BYTES = 8 * 1024 * 1024;

// Plain maps (no records) keep payloads readable by every msgpack client.
const packr = new Packr({ useRecords: false, mapsAsObjects: true, int64AsType: "number" });
const textDecoder = new TextDecoder("utf-8", { fatal: true });
const textEncoder = new TextEncoder();

/** Wire encodings. */
export type Encoding = "msgpack" | "json";

/** Encodes a message as msgpack. */
export function encode(message: unknown): Uint8Array {
  return packr.pack(message);
}

/** Encodes a message as JSON; byte arrays become base64 strings. */
export function encodeJson(message: unknown): Uint8Array {
  return textEncoder.encode(
    JSON.stringify(message, (_key, value) => {
      if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64");
      if (value && typeof value === "object" && value.type === "Buffer" && Array.isArray(value.data)) {
        return Buffer.from(value.data).toString("base64");
      }
      return value;
    }),
  );
}

/** Encodes in the named encoding. */
export function encodeAs(message: unknown, encoding: Encoding): Uint8Array {
  return encoding === "json" ? encodeJson(message) : encode(message);
}

/**
 * Whether a payload reads as a JSON object: its first byte other than JSON whitespace is `{`.
 * No message of ours is msgpack starting so (they are maps; `{` is the msgpack integer 123).
 */
export function looksLikeJson(data: Uint8Array): boolean {
  for (const byte of data) {
    if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) continue;
    return byte === 0x7b;
  }
  return false;
}

/** Parses raw bytes (msgpack or JSON) into an unvalidated value; malformed input is a typed error. */
export function parseRaw(data: Uint8Array, encoding: Encoding = "msgpack"): unknown {
  if (data.byteLength === 0) throw new HadisError("malformed_payload", "empty payload");
  if (data.byteLength > MAX_PAYLOAD_BYTES) {
    throw new HadisError("payload_too_large", `payload of ${data.byteLength} bytes exceeds ${MAX_PAYLOAD_BYTES}`);
  }
  if (encoding === "msgpack" && looksLikeJson(data)) {
    throw new HadisError(
      "malformed_payload",
      "payload is JSON where msgpack was expected: send it with the header Content-Type: application/json (or without a Content-Type)",
    );
  }
  try {
    if (encoding === "json") return JSON.parse(textDecoder.decode(data));
    const value = packr.unpack(data);
    // msgpackr answers the reserved byte 0xc1 with a marker object instead of an error.
    if (value === undefined || (typeof value === "object" && value !== null && value.constructor?.name === "C1Type")) {
      throw new Error("reserved or empty msgpack value");
    }
    return value;
  } catch (err) {
    throw new HadisError("malformed_payload", `payload is not valid ${encoding}: ${(err as Error).message}`, {}, { cause: err });
  }
}

/** Longest unknown field name an error quotes whole. */
const MAX_FIELD_NAME = 100;

/** Validates a parsed value against a schema; version mismatches and schema errors are typed. */
export function validate<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const v = (value as { v?: unknown }).v;
    if (v !== undefined && v !== PROTOCOL_VERSION) {
      throw new HadisError("unsupported_version", `${what}: protocol version ${String(v)} is not supported (this is ${PROTOCOL_VERSION})`, {
        field: "v",
      });
    }
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    // An unknown field is named by the field, not by the object it is in (a name of megabytes, cut:
    // the message quoting it and the field naming it would not fit one reply).
    const at = issue?.path ?? [];
    const unknown =
      issue?.code === "unrecognized_keys"
        ? issue.keys.map((k) => [...at, k.length > MAX_FIELD_NAME ? `${k.slice(0, MAX_FIELD_NAME)}…` : k].join("."))
        : [];
    const field = unknown[0] ?? (at.length > 0 ? at.join(".") : undefined);
    // A refusal the schema names its own code for (a prompt too long, say) is answered as it says.
    const refusal = issue?.code === "custom" ? (issue.params as Partial<RefusalParams> | undefined)?.errorCode : undefined;
    if (refusal && issue) throw new HadisError(refusal, issue.message, field ? { field } : {});
    const message = !issue
      ? "invalid"
      : unknown.length > 0
        ? `unknown field${unknown.length > 1 ? "s" : ""} ${unknown.map((f) => JSON.stringify(f)).join(", ")}`
        : field
          ? `${field}: ${issue.message}`
          : issue.message;
    throw new HadisError("invalid_request", `${what}: ${message}`, field ? { field } : {});
  }
  return parsed.data;
}

/** Decodes and validates a message in one step. */
export function decode<S extends z.ZodType>(schema: S, data: Uint8Array, what: string, encoding: Encoding = "msgpack"): z.infer<S> {
  return validate(schema, parseRaw(data, encoding), what);
}

/**
 * Decodes a message published under its sender's id (a heartbeat, a router's load report) and
 * checks that it names the sender its subject does: one that names another would add a worker or
 * router nobody runs.
 */
export function decodeFromSender<S extends z.ZodType>(
  schema: S,
  m: { subject: string; data: Uint8Array },
  what: string,
  senderIn: (message: z.infer<S>) => string,
): z.infer<S> {
  const message = decode(schema, m.data, what);
  const named = senderIn(message);
  const subjectSender = senderOf(m.subject);
  if (named !== subjectSender) throw new HadisError("invalid_request", `${what}: sent as "${named}" on the subject of "${subjectSender}"`);
  return message;
}
