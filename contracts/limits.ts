/** Limits of the wire's values and the default server, as plain values: the CLI's help and checks read them without loading the schemas or the NATS client. */

/** Longest deadline a caller may ask for (10 minutes). */
export const MAX_DEADLINE_MS = 600_000;
/** Largest seed (a 32-bit unsigned integer). */
export const MAX_SEED = 0xffffffff;
/** Longest idempotency key, in characters. */
export const MAX_IDEMPOTENCY_KEY_CHARS = 128;
/** Longest worker or router id, in characters. */
export const MAX_SERVICE_ID_CHARS = 128;

/** Default NATS URL everywhere (where `npm start` listens). */
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";
