/** Helpers shared by the benchmarks: the system under test, percentiles and result files. */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { mulberry32 } from "../actors/profile/stats.ts";

/** Percentile (0..100) of unsorted values, interpolated between the two nearest ranks (numpy's default: the median of an even count is the mean of the middle two). */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const x = (Math.min(100, Math.max(0, p)) / 100) * (sorted.length - 1);
  const lo = Math.floor(x);
  return sorted[lo] + (sorted[Math.ceil(x)] - sorted[lo]) * (x - lo);
}

/**
 * The order of a block's phases: a shuffle of `0..n-1`, seeded by the block number (the same
 * run, the same orders). A fixed rotation gives every mode the same predecessor, and anything
 * periodic (a control tick, heartbeats) the same place in the block: both then read as a cost
 * of the mode. Shuffled, they are noise that the median and quartiles show.
 */
export function blockOrder(n: number, block: number): number[] {
  const next = mulberry32((block + 1) * 0x9e3779b1);
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
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

/**
 * `--pin`'s wrapper: `taskset` to the machine's last core, for the services alone there while the
 * bench, its nats-server and its collector stay on the cores the bench was started on (`taskset
 * -c 0`). The machine's cores, not this process's: under `taskset -c 0` Node's
 * `availableParallelism()` is 1, and its last core is core 0.
 */
export function pinnedToLastCore(): string[] {
  const last = cpus().length - 1;
  if (availableParallelism() === cpus().length)
    console.warn(`--pin: start the bench under \`taskset -c 0\`: it shares core ${last} with the services otherwise`);
  return ["taskset", "-c", String(last)];
}

/** The cores a process may run on (`/proc/<pid>/status`), e.g. "1" or "0-1". */
function coresOf(pid: number): string {
  return /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? "?";
}

/** Where the services (once started) and the bench may run: printed, and kept in the results so a run says where it ran. */
export function placement(servicesPid: number): { services: string; bench: string } {
  const cores = { services: coresOf(servicesPid), bench: coresOf(process.pid) };
  console.log(`services on core(s) ${cores.services}; the bench, its nats-server and collector on ${cores.bench}`);
  return cores;
}

/**
 * Starts the whole system in a child process (as `npm start` would) on profile models and 16
 * workers: zero-latency ones (the serving layer's own cost, CPU-bound), or with `timeScale` the
 * profiled latencies times it (0.1: the paper's 10x compression). With the `static` policy (the
 * default here) every request goes light and is judged, 1% escalated so the heavy path runs too
 * (with profiled latencies about one in 700: the one heavy worker of the static split, 13 s an
 * image, could not keep up with 1% of a hundred requests a second); other policies ignore that
 * configuration. `nodeArgs` go before the script (profiling flags); `wrap` runs node under
 * another command (e.g. `taskset`); `entry` runs a script that imports the CLI in its place, and
 * `ipc` opens Node's IPC channel to it.
 */
export function spawnBenchSystem(
  natsUrl: string,
  opts: {
    policy?: string;
    env?: Record<string, string>;
    nodeArgs?: string[];
    wrap?: string[];
    entry?: string;
    ipc?: boolean;
    timeScale?: number;
  } = {},
): ChildProcess {
  const cli = opts.entry ?? fileURLToPath(new URL("../services/cli/main.ts", import.meta.url));
  const args = [
    ...(opts.nodeArgs ?? []),
    "--import",
    "tsx",
    cli,
    "serve",
    "all",
    "--nats",
    natsUrl,
    ...(opts.timeScale ? ["--time-scale", String(opts.timeScale)] : ["--zero-latency"]),
    "--storage",
    "memory",
    "--workers",
    "16",
    "--policy",
    opts.policy ?? "static",
    // The static policy's configuration (another policy refuses the flag).
    ...((opts.policy ?? "static") === "static"
      ? [
          "--static-config",
          JSON.stringify({
            light: "sd35-large-turbo",
            heavy: "sd35-medium",
            routerThreshold: 0,
            discThreshold: opts.timeScale ? 0.003 : 0.01,
            lightBatchSize: 8,
            heavyBatchSize: 8,
          }),
        ]
      : []),
  ];
  const [command, ...pre] = opts.wrap?.length ? [...opts.wrap, process.execPath] : [process.execPath];
  return spawn(command, [...pre, ...args], {
    stdio: ["ignore", "inherit", "inherit", ...(opts.ipc ? ["ipc" as const] : [])],
    env: { ...process.env, HADIS_LOG: "warn", ...opts.env },
  });
}

/** Rounds for printing. */
export const r2 = (x: number) => Math.round(x * 100) / 100;

/** Latencies of a closed loop: `n` callers, each sending the next request when the last is answered. */
export async function closedLoop(
  n: number,
  durS: number,
  call: () => Promise<unknown>,
): Promise<{ latencies: number[]; errors: number; elapsedS: number }> {
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
