/** Parsers for CLI option values, with clear errors. */
import { InvalidArgumentError } from "commander";
import { TOKEN } from "../../contracts/subjects.ts";
import { MAX_SERVICE_ID_CHARS } from "../../contracts/limits.ts";
import { parseFidelity } from "../../actors/artifact/mechanisms.ts";

/** A finite number. */
export function num(value: string): number {
  // Number("") and Number(" ") are 0: an empty value is a mistake, not zero.
  const n = value.trim() === "" ? Number.NaN : Number(value);
  if (!Number.isFinite(n)) throw new InvalidArgumentError(`"${value}" is not a number`);
  return n;
}

/** A positive number. */
export function positive(value: string): number {
  const n = num(value);
  if (n <= 0) throw new InvalidArgumentError(`"${value}" must be greater than 0`);
  return n;
}

/** A non-negative integer. */
export function count(value: string): number {
  const n = num(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`"${value}" must be a whole number, 0 or more`);
  return n;
}

/** A whole number of at least 1 (workers, routers). */
export function atLeastOne(value: string): number {
  const n = num(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`"${value}" must be a whole number, 1 or more`);
  return n;
}

/** A TCP port (0 = pick a free one). */
export function port(value: string): number {
  const n = count(value);
  if (n > 65535) throw new InvalidArgumentError(`"${value}" is not a port`);
  return n;
}

/** A whole number from `min` to `max`. */
export function integerIn(min: number, max: number): (value: string) => number {
  return (value) => {
    // (A negative or fractional value is out of the range too: said with the range, not without.)
    const n = value.trim() === "" ? Number.NaN : Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`"${value}" must be a whole number from ${min.toLocaleString("en")} to ${max.toLocaleString("en")}`);
    return n;
  };
}

/** A number of at least 0. */
export function nonNegative(value: string): number {
  const n = num(value);
  if (n < 0) throw new InvalidArgumentError(`"${value}" must not be negative`);
  return n;
}

/** A string of 1 to `max` characters (an empty value is a mistake, e.g. an unset shell variable). */
export function text(max: number): (value: string) => string {
  return (value) => {
    if (value.length === 0) throw new InvalidArgumentError("must not be empty");
    if (value.length > max) throw new InvalidArgumentError(`must be at most ${max} characters`);
    return value;
  };
}

/** Longest worker id prefix: room for the `-NNNN` each worker adds (and some). */
const MAX_ID_PREFIX = MAX_SERVICE_ID_CHARS - 8;

/** A worker id prefix: one NATS subject token (letters, digits, _ and -), short enough for the ids made from it. */
export function idPrefix(value: string): string {
  if (!TOKEN.test(value))
    throw new InvalidArgumentError(
      `"${value}" must be letters, digits, _ and - (a worker id is one NATS subject token), starting with a letter or digit`,
    );
  if (value.length > MAX_ID_PREFIX)
    throw new InvalidArgumentError(`must be at most ${MAX_ID_PREFIX} characters (worker ids are at most ${MAX_SERVICE_ID_CHARS})`);
  return value;
}

/** A comma list of artifact mechanisms (`-name` turns one off), checked by name. */
export function mechanismList(value: string): string {
  try {
    parseFidelity("native", value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
}
