/**
 * What tracing costs the pipeline: the same closed-loop load (zero-latency profile models, as in
 * bench/overhead.ts) against a system with tracing off, on for every request, and on for a
 * sampled 10% (spans published on the local span sink, which this process subscribes to as the
 * dashboard would), the modes alternating round by round in one run so drift hits all alike.
 * Besides throughput and latency it reports the services' CPU time per request, which other load
 * on a shared machine disturbs far less.
 *
 *   node --import tsx bench/tracing.ts [--seconds 6] [--concurrency 200] [--rounds 2] [--modes off,on,nosink,sampled]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { startNatsServer } from "../services/lib/nats-server.ts";
import { connectNats, type NatsConnection } from "../services/lib/nats.ts";
import { HadisClient } from "../services/lib/client.ts";
import { spanSinkSubject } from "../services/lib/telemetry.ts";
import { closedLoop, median, percentile, r2, writeResult } from "./lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const seconds = Number(args.get("--seconds") ?? 6);
const concurrency = Number(args.get("--concurrency") ?? 200);
const rounds = Number(args.get("--rounds") ?? 2);

/** A tracing configuration under test. */
interface Mode {
  key: string;
  name: string;
  env: Record<string, string>;
}

const ALL_MODES: Mode[] = [
  { key: "off", name: "off", env: { HADIS_TRACING: "off", HADIS_SPAN_SINK: "off" } },
  { key: "on", name: "on (every request)", env: { HADIS_TRACING: "on", HADIS_SPAN_SINK: "on", OTEL_TRACES_SAMPLER: "parentbased_always_on" } },
  { key: "nosink", name: "on, no span sink", env: { HADIS_TRACING: "on", HADIS_SPAN_SINK: "off", OTEL_TRACES_SAMPLER: "parentbased_always_on" } },
  { key: "sampled", name: "on (10% sampled)", env: { HADIS_TRACING: "on", HADIS_SPAN_SINK: "on", OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" } },
];
const MODES = ALL_MODES.filter((m) => (args.get("--modes") ?? "off,on,nosink,sampled").split(",").includes(m.key));

interface Run {
  label: string;
  mode: string;
  requests: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** CPU time of the services process per request, ms (insensitive to other load on the machine). */
  cpuMsPerRequest: number;
  sinkMessages: number;
  sinkBytes: number;
}

/** User + system CPU time of a process so far, ms (Linux /proc; clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}


function startSystemProcess(url: string, mode: Mode): ChildProcess {
  const cli = fileURLToPath(new URL("../services/cli/main.ts", import.meta.url));
  return spawn(process.execPath, [
    "--import", "tsx", cli, "serve", "all", "--nats", url, "--zero-latency", "--storage", "memory", "--workers", "16", "--policy", "static",
    "--static-config", JSON.stringify({ light: "sd35-large-turbo", heavy: "sd35-medium", routerThreshold: 0, discThreshold: 0.01, lightBatchSize: 8, heavyBatchSize: 8 }),
  ], {
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, HADIS_LOG: "warn", OTEL_EXPORTER_OTLP_ENDPOINT: "", ...mode.env },
  });
}

async function waitUntilServing(client: HadisClient): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await client.generate({ prompt: "warm up", deadlineMs: 5_000 }, { timeoutMs: 2_000 });
      return;
    } catch {
      if (i > 150) throw new Error("system did not come up");
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function round(url: string, nc: NatsConnection, mode: Mode): Promise<Run> {
  const child = startSystemProcess(url, mode);
  const client = new HadisClient(nc);
  let sinkMessages = 0;
  let sinkBytes = 0;
  // The dashboard's side of the sink: count what arrives (decoding is the dashboard's cost, not the pipeline's).
  const sub = nc.subscribe(spanSinkSubject(), {
    callback: (_e, m) => {
      sinkMessages++;
      sinkBytes += m.data.length;
    },
  });
  try {
    await waitUntilServing(client);
    let i = 0;
    const call = () => client.generate({ prompt: `a photo of object ${i++ % 5000}`, deadlineMs: 30_000 });
    await closedLoop(50, 2, call); // warm-up
    sinkMessages = 0;
    sinkBytes = 0;
    const cpuBefore = cpuMs(child.pid!);
    const { latencies, errors, elapsedS } = await closedLoop(concurrency, seconds, call);
    const cpuUsed = cpuMs(child.pid!) - cpuBefore;
    await new Promise((r) => setTimeout(r, 500)); // last span batches
    return {
      label: `tracing ${mode.name}, ${concurrency} callers`,
      mode: mode.name,
      requests: latencies.length,
      errors,
      rps: Math.round(latencies.length / elapsedS),
      p50Ms: r2(median(latencies)),
      p99Ms: r2(percentile(latencies, 99)),
      meanMs: r2(latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length)),
      cpuMsPerRequest: Math.round((cpuUsed / Math.max(1, latencies.length)) * 1000) / 1000,
      sinkMessages,
      sinkBytes,
    };
  } finally {
    sub.unsubscribe();
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}

async function main() {
  const server = await startNatsServer();
  const nc = await connectNats(server.url, "bench-tracing");
  const runs: Run[] = [];
  for (let r = 0; r < rounds; r++) for (const mode of MODES) runs.push(await round(server.url, nc, mode));
  console.table(runs);
  const mean = (mode: string, k: "rps" | "p50Ms" | "p99Ms" | "meanMs" | "cpuMsPerRequest" | "sinkBytes" | "requests") => {
    const xs = runs.filter((x) => x.mode === mode).map((x) => x[k]);
    return xs.reduce((a, b) => a + b, 0) / xs.length;
  };
  const off = MODES[0].name;
  const summary = Object.fromEntries(
    MODES.map((m) => [
      m.name,
      {
        rps: Math.round(mean(m.name, "rps")),
        p50Ms: r2(mean(m.name, "p50Ms")),
        p99Ms: r2(mean(m.name, "p99Ms")),
        meanMs: r2(mean(m.name, "meanMs")),
        cpuMsPerRequest: Math.round(mean(m.name, "cpuMsPerRequest") * 1000) / 1000,
        sinkBytesPerRequest: Math.round(mean(m.name, "sinkBytes") / Math.max(1, mean(m.name, "requests"))),
        // Costs relative to tracing off, percent.
        throughputCostPct: r2((1 - mean(m.name, "rps") / mean(off, "rps")) * 100),
        meanLatencyCostPct: r2((mean(m.name, "meanMs") / mean(off, "meanMs") - 1) * 100),
        cpuCostPct: r2((mean(m.name, "cpuMsPerRequest") / mean(off, "cpuMsPerRequest") - 1) * 100),
      },
    ]),
  );
  console.log(summary);
  console.log("wrote", writeResult("tracing", { date: new Date().toISOString(), seconds, concurrency, rounds, runs, summary }));
  await nc.close();
  await server.stop();
}

await main();
