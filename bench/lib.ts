/** Helpers shared by the benchmarks: percentiles and result files. */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Percentile (0..100) of unsorted values, nearest-rank. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** Median of values. */
export const median = (values: number[]) => percentile(values, 50);

/** Writes a benchmark's JSON result under bench/results/. */
export function writeResult(name: string, data: unknown): string {
  const dir = join(dirname(fileURLToPath(import.meta.url)), "results");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(data, null, 2) + "\n");
  return path;
}

/** Rounds for printing. */
export const r2 = (x: number) => Math.round(x * 100) / 100;

/** Latencies of a closed loop: `n` callers, each sending the next request when the last is answered. */
export async function closedLoop(n: number, durS: number, call: () => Promise<unknown>): Promise<{ latencies: number[]; errors: number; elapsedS: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + durS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await call();
          latencies.push(performance.now() - t);
        } catch {
          errors++;
        }
      }
    }),
  );
  return { latencies, errors, elapsedS: (performance.now() - started) / 1000 };
}
