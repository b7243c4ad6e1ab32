/**
 * Typed errors. `HadisError` is the wire protocol's: a code, whether a retry can help, and a
 * cause; `toWireError` / `fromWireError` are the one pair that puts it on the wire and reads it
 * back. The others are what an operator sees (a command's output, a service's log, a failed
 * start): `ConfigurationError` (something given that cannot be used), `ModelExportError` (a model
 * export or profile that cannot be loaded or run) and `DependencyError` (a part the process needs
 * did not start or answer). Anything else thrown is a bug, and reads as `internal` on the wire.
 */

/** Error codes; the number is the `Nats-Service-Error-Code` header (HTTP-like). */
export const ErrorCodes = {
  malformed_payload: 400,
  invalid_request: 400,
  prompt_too_long: 413,
  payload_too_large: 413,
  unsupported_version: 400,
  unknown_model: 404,
  unknown_job: 404,
  not_found: 404,
  method_not_allowed: 405,
  too_many_requests: 429,
  deadline_exceeded: 504,
  overloaded: 503,
  no_capacity: 503,
  generation_failed: 500,
  judge_failed: 500,
  internal: 500,
} as const;
/** One of the error codes. */
export type ErrorCode = keyof typeof ErrorCodes;

const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "deadline_exceeded",
  "too_many_requests",
  "overloaded",
  "no_capacity",
  "generation_failed",
  "judge_failed",
  "internal",
]);

/** Extra structured facts an error may carry. */
export interface ErrorDetails {
  /** The request field at fault, e.g. `prompt`. */
  field?: string;
  /** Suggested wait before retrying, in milliseconds. */
  retryAfterMs?: number;
  /** Request id, when one was assigned. */
  requestId?: string;
  [key: string]: unknown;
}

/** Longest error message (and string detail) kept, in characters: messages quote what callers sent. */
export const MAX_ERROR_TEXT = 1_024;

/** `s` cut to `MAX_ERROR_TEXT` characters, saying how much was cut. */
function bounded(s: string): string {
  return s.length <= MAX_ERROR_TEXT ? s : `${s.slice(0, MAX_ERROR_TEXT)}… (${s.length - MAX_ERROR_TEXT} more characters)`;
}

/**
 * The one error class of HADIS: what went wrong (`code`), whether retrying can help, and why. Its
 * message and string details are cut to `MAX_ERROR_TEXT` characters: an error that quotes a
 * 4 MB field (a protocol version, an unknown key) must still fit in its reply.
 */
export class HadisError extends Error {
  override readonly name = "HadisError";
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(bounded(message), options);
    this.code = code;
    this.retryable = RETRYABLE.has(code);
    this.details = { ...details };
    for (const key in this.details) if (typeof this.details[key] === "string") this.details[key] = bounded(this.details[key]);
  }

  /** HTTP-like status number of this error's code. */
  get status(): number {
    return ErrorCodes[this.code];
  }
}

/** What the operator-facing errors take besides their message. */
export interface OperatorErrorOptions {
  /** The flag, environment variable, file or setting to change. */
  setting?: string;
  cause?: unknown;
}

/** An error an operator acts on (not a caller's, not a bug): its message says what to fix, `setting` where. */
export abstract class OperatorError extends Error {
  readonly setting?: string;

  constructor(message: string, options: OperatorErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    if (options.setting !== undefined) this.setting = options.setting;
  }
}

/**
 * A flag, environment variable, configuration or data file that cannot be used, found before
 * anything starts: what is wrong and what to change. `hadis` commands end with exit code 2 on it.
 */
export class ConfigurationError extends OperatorError {
  override readonly name = "ConfigurationError";
}

/**
 * A model export (an ONNX folder, its scheduler, tokenizer or graph) or a model's profile that
 * this build cannot load or run as it is: says what is wrong and where. A worker reports its load
 * as failed; at start it ends the command.
 */
export class ModelExportError extends OperatorError {
  override readonly name = "ModelExportError";
}

/**
 * A part the process depends on did not start or answer: the nats-server binary, the NATS
 * server, a library whose internals changed. Says which, and what was tried.
 */
export class DependencyError extends OperatorError {
  override readonly name = "DependencyError";
}

/** The typed error body carried in an error reply. */
export interface WireError {
  v: number;
  error: { code: ErrorCode; status: number; message: string; retryable: boolean; details?: ErrorDetails };
}

/** Wraps anything thrown into a HadisError (unknown errors become `internal`). */
export function asHadisError(err: unknown): HadisError {
  if (err instanceof HadisError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new HadisError("internal", message, {}, { cause: err });
}

/** Builds the typed body of an error reply. */
export function toWireError(err: unknown, version: number): WireError {
  const e = asHadisError(err);
  const hasDetails = Object.keys(e.details).length > 0;
  return {
    v: version,
    error: {
      code: e.code,
      status: e.status,
      message: e.message,
      retryable: e.retryable,
      ...(hasDetails ? { details: e.details } : {}),
    },
  };
}

/** True when `value` looks like a typed error body. */
export function isWireError(value: unknown): value is WireError {
  if (typeof value !== "object" || value === null) return false;
  const error = (value as { error?: unknown }).error;
  return typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string";
}

/** Reads a typed error body back into a HadisError. */
export function fromWireError(body: WireError): HadisError {
  // (Own keys only: `"toString" in ErrorCodes` is true, and read as a code it made a status of a function.)
  const code = (Object.hasOwn(ErrorCodes, body.error.code) ? body.error.code : "internal") as ErrorCode;
  // Details from another process: facts (strings, numbers, flags), not structures of any size.
  const details: ErrorDetails = {};
  const given = typeof body.error.details === "object" && body.error.details !== null ? body.error.details : {};
  for (const [key, value] of Object.entries(given)) if (["string", "number", "boolean"].includes(typeof value)) details[key] = value;
  return new HadisError(code, String(body.error.message), details);
}
