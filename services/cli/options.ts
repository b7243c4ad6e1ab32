/** Parsers for CLI option values, with clear errors. */
import { InvalidArgumentError } from "commander";

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
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`"${value}" must be a whole number`);
  return n;
}

/** A whole number of at least 1 (workers, routers). */
export function atLeastOne(value: string): number {
  const n = count(value);
  if (n < 1) throw new InvalidArgumentError(`"${value}" must be at least 1`);
  return n;
}

/** A TCP port (0 = pick a free one). */
export function port(value: string): number {
  const n = count(value);
  if (n > 65535) throw new InvalidArgumentError(`"${value}" is not a port`);
  return n;
}
