/** `hadis trace --from-hourly`: writes an arrival trace scaled from an hourly invocation shape. */
import { readFileSync, writeFileSync } from "node:fs";
import { formatTrace, parseHourlyInvocations, traceFromHourly } from "../../../actors/sim/trace.ts";
import { ConfigurationError } from "../../../contracts/errors.ts";

/** Options of `hadis trace`. */
export interface TraceOptions {
  fromHourly: string;
  minQps: number;
  maxQps: number;
  seconds: number;
  seed: number;
  promptCount: number;
  out: string;
}

/** Generates and writes the trace; prints a one-line summary. */
export function traceCommand(opts: TraceOptions): void {
  if (opts.maxQps < opts.minQps) throw new ConfigurationError("--max-qps must be at least --min-qps");
  let hourly: number[];
  try {
    hourly = parseHourlyInvocations(readFileSync(opts.fromHourly, "utf8"));
  } catch (err) {
    throw new ConfigurationError(`${opts.fromHourly}: ${(err as Error).message}`, { cause: err });
  }
  const arrivals = traceFromHourly(hourly, opts);
  writeFileSync(opts.out, formatTrace(arrivals));
  process.stdout.write(
    `wrote ${opts.out}: ${arrivals.length} arrivals over ${opts.seconds} s (${opts.minQps}..${opts.maxQps} qps shape, seed ${opts.seed})\n`,
  );
}
