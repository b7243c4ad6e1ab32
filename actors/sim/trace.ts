/**
 * Arrival traces: `arrival_ms,prompt_idx` lines, and a generator that scales an hourly
 * invocation shape (the Azure Functions trace) to a QPS range with Poisson arrivals per second.
 * Pure and seeded: the same inputs give the same trace.
 */
import { mulberry32 } from "../profile/stats.ts";
import type { Arrival } from "../profile/reference.ts";

export type { Arrival };

/** Deterministic 32-bit PRNG (mulberry32): uniform in [0, 1). */
export const seededRandom = mulberry32;

/** A Poisson draw with mean `lambda` (Knuth's product method, split for large means). */
export function poisson(lambda: number, random: () => number): number {
  let n = 0;
  let left = lambda;
  while (left > 0) {
    const step = Math.min(left, 30);
    left -= step;
    const limit = Math.exp(-step);
    let p = random();
    while (p > limit) {
      n++;
      p *= random();
    }
  }
  return n;
}

/**
 * Parses `,hour,invocations` (the hourly Azure shape): invocations per hour, hour by hour. Hours
 * must follow each other without a gap or repeat, and every cell must hold a number: a silent
 * gap or an empty cell read as 0 would bend the shape the trace is scaled from.
 */
export function parseHourlyInvocations(text: string): number[] {
  const lines = text
    .split(/\r?\n/)
    .map((line, i) => ({ line, at: i + 1 }))
    .filter((l) => l.line.trim().length > 0);
  if (lines.length === 0) throw new Error("hourly CSV is empty");
  const header = lines[0].line.split(",").map((h) => h.trim());
  const column = (name: string) => {
    const col = header.indexOf(name);
    if (col < 0) throw new Error(`hourly CSV line ${lines[0].at}: no "${name}" column in "${lines[0].line}"`);
    return col;
  };
  const hourCol = column("hour");
  const countCol = column("invocations");
  if (lines.length === 1) throw new Error("hourly CSV has a header but no rows");
  let lastHour: number | null = null;
  return lines.slice(1).map(({ line, at }) => {
    const cells = line.split(",").map((c) => c.trim());
    const where = `hourly CSV line ${at}`;
    const hourCell = cells[hourCol] ?? "";
    if (hourCell === "") throw new Error(`${where}: empty hour`);
    const hour = Number(hourCell);
    if (!Number.isInteger(hour)) throw new Error(`${where}: hour "${hourCell}" is not a whole number`);
    if (lastHour !== null && hour !== lastHour + 1) {
      const missing = hour > lastHour + 1 ? ` (hour ${lastHour + 1} missing)` : "";
      throw new Error(`${where}: hour ${hour} follows hour ${lastHour}${missing}; hours must rise by one`);
    }
    lastHour = hour;
    const countCell = cells[countCol] ?? "";
    if (countCell === "") throw new Error(`${where}: empty invocations`);
    const count = Number(countCell);
    if (!Number.isFinite(count) || count < 0) throw new Error(`${where}: invocations "${countCell}" is not a non-negative number`);
    return count;
  });
}

/** Options of `traceFromHourly`. */
export interface HourlyTraceOptions {
  minQps: number;
  maxQps: number;
  /** Trace length, s: the hourly shape is resampled (linear interpolation) to one rate per second. */
  seconds: number;
  seed: number;
  /** Prompt indices are uniform in [0, promptCount). */
  promptCount: number;
}

/** Target rate per second: the hourly shape min–max scaled to [minQps, maxQps]. */
export function ratePerSecond(hourly: readonly number[], opts: Pick<HourlyTraceOptions, "minQps" | "maxQps" | "seconds">): number[] {
  if (hourly.length === 0) throw new Error("empty hourly shape");
  const lo = Math.min(...hourly);
  const hi = Math.max(...hourly);
  const out: number[] = [];
  for (let s = 0; s < opts.seconds; s++) {
    const x = opts.seconds <= 1 ? 0 : (s / (opts.seconds - 1)) * (hourly.length - 1);
    const i = Math.floor(x);
    const f = x - i;
    const v = i + 1 < hourly.length ? hourly[i] * (1 - f) + hourly[i + 1] * f : hourly[i];
    const unit = hi > lo ? (v - lo) / (hi - lo) : 1;
    out.push(opts.minQps + unit * (opts.maxQps - opts.minQps));
  }
  return out;
}

/** Generates arrivals: Poisson count per second at the scaled rate, times uniform in the second. */
export function traceFromHourly(hourly: readonly number[], opts: HourlyTraceOptions): Arrival[] {
  return traceFromRates(ratePerSecond(hourly, opts), opts.seed, opts.promptCount);
}

/** Poisson arrivals per second at the given rates (one a second), uniform within the second, prompts uniform below `promptCount`. */
export function traceFromRates(rates: readonly number[], seed: number, promptCount: number): Arrival[] {
  const random = seededRandom(seed);
  const out: Arrival[] = [];
  rates.forEach((qps, s) => {
    const n = poisson(qps, random);
    const times: number[] = [];
    for (let k = 0; k < n; k++) times.push(Math.floor((s + random()) * 1000));
    times.sort((a, b) => a - b);
    for (const atMs of times) out.push({ atMs, promptIdx: Math.floor(random() * promptCount) });
  });
  return out;
}

/** Formats a trace as `arrival_ms,prompt_idx` lines (the reference format). */
export function formatTrace(arrivals: readonly Arrival[]): string {
  return arrivals.map((a) => `${a.atMs.toFixed(1)},${a.promptIdx}`).join("\n") + "\n";
}

/**
 * The clairvoyant demand of a trace: at time t, the arrival rate over [t, t + windowMs] (what a
 * planner that knew the trace would see until its next plan could take over), qps.
 */
export function futureDemandOracle(arrivals: readonly Arrival[], windowMs: number): (nowMs: number) => number {
  const times = arrivals.map((a) => a.atMs).sort((a, b) => a - b);
  const firstAtOrAfter = (t: number) => {
    let lo = 0;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (times[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  return (nowMs) => ((firstAtOrAfter(nowMs + windowMs) - firstAtOrAfter(nowMs)) * 1000) / windowMs;
}

/** A step in demand: `lowQps` until `stepAtS`, then `highQps`, for `seconds` (Poisson arrivals). */
export function stepTrace(opts: {
  lowQps: number;
  highQps: number;
  stepAtS: number;
  seconds: number;
  seed: number;
  promptCount: number;
}): Arrival[] {
  return traceFromRates(
    Array.from({ length: opts.seconds }, (_, s) => (s < opts.stepAtS ? opts.lowQps : opts.highQps)),
    opts.seed,
    opts.promptCount,
  );
}
