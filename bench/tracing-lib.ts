/**
 * What the tracing benchmarks share: the tracing modes, a stand-in OTLP collector, the services
 * process whose tracing the bench switches (bench/tracing-child.ts) and a closed-loop load that
 * records every completion.
 */
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { HadisClient } from "../services/client/client.ts";
import { spawnBenchSystem } from "./lib.ts";
import type { TracingSwitch } from "./tracing-child.ts";

/**
 * The options the phase benches share: `--seconds` (default `defaultSeconds`), `--concurrency`
 * (200), `--window-ms` (600), `--settle-ms` (250), `--pin`, `--node-args` (flags of the
 * services' node); `args` holds every `--name value` pair for a bench's own.
 */
export function phaseOptions(defaultSeconds: number) {
  const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
  return {
    args,
    seconds: Number(args.get("--seconds") ?? defaultSeconds),
    concurrency: Number(args.get("--concurrency") ?? 200),
    windowMs: Number(args.get("--window-ms") ?? 600),
    settleMs: Number(args.get("--settle-ms") ?? 250),
    pin: process.argv.includes("--pin"),
    nodeArgs: (args.get("--node-args") ?? "").split(" ").filter(Boolean),
  };
}

/** A tracing configuration under test (`otlpUrl: ""`: the stand-in collector). */
export interface Mode {
  key: string;
  name: string;
  config: Omit<TracingSwitch, "id">;
}

const ALWAYS = "parentbased_always_on";
export const ALL_MODES: Mode[] = [
  { key: "off", name: "off", config: { enabled: false, spanSink: false, otlpUrl: null, sampler: ALWAYS } },
  // The same as "off" under another name: what a method reads as a cost when there is none.
  { key: "off2", name: "off again (the method's noise)", config: { enabled: false, spanSink: false, otlpUrl: null, sampler: ALWAYS } },
  // The default of `npm start`: the dashboard's traces (20 requests a second) are recorded.
  { key: "on", name: "on (dashboard, 20 traces/s)", config: { enabled: true, spanSink: true, otlpUrl: null, sampler: ALWAYS } },
  {
    key: "sinkall",
    name: "on, every trace to the dashboard",
    config: { enabled: true, spanSink: true, otlpUrl: null, sampler: ALWAYS, sinkTracesPerSecond: Infinity },
  },
  // Every span recorded and handed to an exporter that drops it: the recording part of "otlp".
  {
    key: "record",
    name: "every span recorded, not exported",
    config: { enabled: true, spanSink: true, otlpUrl: null, sampler: ALWAYS, discard: true },
  },
  { key: "otlp", name: "every span exported (OTLP/HTTP)", config: { enabled: true, spanSink: true, otlpUrl: "", sampler: ALWAYS } },
  {
    key: "sampled",
    name: "10% sampled, exported (OTLP/HTTP)",
    config: { enabled: true, spanSink: true, otlpUrl: "", sampler: "parentbased_traceidratio", samplerArg: 0.1 },
  },
];

/** The modes named by a comma-separated list, in this file's order; "off" must be one (costs are read against it). */
export function modesNamed(list: string): Mode[] {
  const keys = list.split(",");
  if (!keys.includes("off")) throw new Error(`--modes ${list}: "off" must be one of them (costs are read against it)`);
  return ALL_MODES.filter((m) => keys.includes(m.key));
}

/** A stand-in collector: accepts OTLP/HTTP trace exports and counts their bytes. */
export async function startOtlpReceiver(): Promise<{ url: string; bytes: () => number; close: () => Promise<void> }> {
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => (bytes += chunk.length));
    req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1/traces`, bytes: () => bytes, close: () => new Promise((r) => server.close(() => r())) };
}

/** The system (zero-latency models unless `timeScale`), in a child process whose tracing `switchTracing` changes. */
export function spawnSwitchableSystem(natsUrl: string, wrap: string[], nodeArgs: string[] = [], timeScale?: number): ChildProcess {
  return spawnBenchSystem(natsUrl, {
    nodeArgs,
    timeScale,
    env: { HADIS_TRACING: "off", OTEL_EXPORTER_OTLP_ENDPOINT: "" },
    entry: fileURLToPath(new URL("./tracing-child.ts", import.meta.url)),
    ipc: true,
    wrap,
  });
}

let messages = 0;

/** The services process's garbage-collection pauses so far, ms (main thread). */
export async function gcPausesMs(child: ChildProcess): Promise<number> {
  return (await ask<{ gcMs: number }>(child, { gc: true })).gcMs;
}

/** Sends the services process a message and waits for its answer (the same id back). */
export function ask<T extends object = object>(child: ChildProcess, message: object): Promise<T> {
  const id = ++messages;
  return new Promise((resolve, reject) => {
    const onExit = () => reject(new Error("the services process exited"));
    const onMessage = (m: { id: number }) => {
      if (m.id !== id) return;
      child.off("message", onMessage);
      child.off("exit", onExit);
      resolve(m as T);
    };
    child.on("message", onMessage);
    child.once("exit", onExit);
    if (!child.connected) return reject(new Error("no IPC channel to the services process"));
    child.send({ ...message, id });
  });
}

/** Switches the child's tracing and waits until it has (its previous exporters flushed). */
export async function switchTracing(
  child: ChildProcess,
  mode: Mode,
  otlpUrl: string,
  overrides: Partial<TracingSwitch> = {},
): Promise<void> {
  const config = { ...mode.config, ...overrides };
  // JSON has no Infinity: every trace to the sink is sent as a rate no run reaches.
  const rate = config.sinkTracesPerSecond === Infinity ? 1e9 : config.sinkTracesPerSecond;
  await ask(child, { ...config, otlpUrl: config.otlpUrl === "" ? otlpUrl : config.otlpUrl, sinkTracesPerSecond: rate });
}

/** A closed loop of `concurrency` callers; completions as [end time, latency ms] (NaN: an error). */
export function startLoad(client: HadisClient, concurrency: number, deadlineMs: number) {
  const done: [number, number][] = [];
  let running = true;
  let i = 0;
  const callers = Array.from({ length: concurrency }, async () => {
    while (running) {
      const t = performance.now();
      try {
        await client.generate({ prompt: `a photo of object ${i++ % 5000}`, deadlineMs });
        done.push([performance.now(), performance.now() - t]);
      } catch {
        done.push([performance.now(), NaN]);
      }
    }
  });
  return {
    done,
    /** Latencies of the requests completed in [from, to). */
    between: (from: number, to: number) => done.filter(([t]) => t >= from && t < to).map(([, lat]) => lat),
    stop: async () => {
      running = false;
      await Promise.all(callers);
    },
  };
}

/** CPU time of each thread of a process so far, ns (Linux schedstat: nanoseconds, not 10 ms ticks). */
export function threadCpuNs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(tid, Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]));
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

/** Each core's busy and total time so far (`/proc/stat`, in clock ticks). */
export function coreTicks(): { busy: number; total: number }[] {
  return readFileSync("/proc/stat", "utf8")
    .split("\n")
    .filter((line) => /^cpu\d/.test(line))
    .map((line) => {
      // user nice system idle iowait irq softirq steal …: idle and iowait are the idle ones.
      const v = line.trim().split(/\s+/).slice(1).map(Number);
      const total = v.reduce((a, b) => a + b, 0);
      return { busy: total - v[3] - (v[4] ?? 0), total };
    });
}

/** Each core's busy share between two readings (0..1, two decimals). */
export function coresBusyBetween(a: ReturnType<typeof coreTicks>, b: ReturnType<typeof coreTicks>): number[] {
  return b.map((x, i) => Math.round(((x.busy - a[i].busy) / Math.max(1, x.total - a[i].total)) * 100) / 100);
}

/** CPU time used between two readings, ms, over the threads present in both. */
export function cpuMsBetween(a: Map<string, number>, b: Map<string, number>): number {
  let ns = 0;
  for (const [tid, t] of b) if (a.has(tid)) ns += t - a.get(tid)!;
  return ns / 1e6;
}
