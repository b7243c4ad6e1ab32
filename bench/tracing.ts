/**
 * What tracing costs the pipeline: the same closed-loop load (zero-latency profile models, as in
 * bench/overhead.ts) against a system in several tracing modes (the local span sink is counted by
 * this process, as the dashboard would; OTLP goes to a stand-in collector here), the modes
 * alternating round by round in one run so drift hits all alike (each round starting with
 * the next mode, so no mode always runs first); the summary gives medians over rounds, and
 * costs as the median of each round's ratio to "off" with its quartiles. Besides throughput and
 * latency it reports the services' CPU time per request. Modes: off; on (every
 * request traced, the default 20 traces/s to the dashboard's sink); on without the sink; on with
 * every trace to the sink; on with OTLP/HTTP export of every span; 10% of requests sampled and
 * exported. First it times the OTLP encoders on 1,024 spans.
 *
 *   node --import tsx bench/tracing.ts [--seconds 6] [--concurrency 200] [--rounds 3] [--modes off,on,nosink,sinkall,otlp,sampled]
 *                                      [--cpu-prof DIR]   (V8 CPU profiles of the services process under DIR/<mode>/)
 *                                      [--pin]            (services on the last core; start this under `taskset -c 0`)
 */
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { startNatsServer } from "../services/lib/nats-server.ts";
import { connectNats, type NatsConnection } from "../services/lib/nats.ts";
import { HadisClient } from "../services/lib/client.ts";
import { configureTelemetry, ServiceTelemetry, spanSinkSubject, SpanKind } from "../services/lib/telemetry.ts";
import { encodeTraceRequest } from "../services/lib/otlp-proto.ts";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { closedLoop, median, percentile, r2, spawnZeroLatencySystem, writeResult } from "./lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const seconds = Number(args.get("--seconds") ?? 6);
const concurrency = Number(args.get("--concurrency") ?? 200);
const rounds = Number(args.get("--rounds") ?? 3);
const cpuProfDir = args.get("--cpu-prof");
const pin = process.argv.includes("--pin");

/** A tracing configuration under test. */
interface Mode {
  key: string;
  name: string;
  env: Record<string, string>;
}

const ALWAYS = { HADIS_TRACING: "on", OTEL_TRACES_SAMPLER: "parentbased_always_on" };
/** Filled in with the bench's own OTLP/HTTP receiver once it listens. */
const otlpEnv: Record<string, string> = {};
const otlpSampledEnv: Record<string, string> = {};
const ALL_MODES: Mode[] = [
  { key: "off", name: "off", env: { HADIS_TRACING: "off", HADIS_SPAN_SINK: "off" } },
  // The default of `npm start`: every request traced, 20 traces a second to the dashboard.
  { key: "on", name: "on (every request)", env: { ...ALWAYS, HADIS_SPAN_SINK: "on" } },
  { key: "nosink", name: "on, no span sink", env: { ...ALWAYS, HADIS_SPAN_SINK: "off" } },
  { key: "sinkall", name: "on, every trace to the sink", env: { ...ALWAYS, HADIS_SPAN_SINK: "on", HADIS_SPAN_SINK_RATE: "all" } },
  { key: "otlp", name: "on, OTLP/HTTP export of every span", env: otlpEnv },
  { key: "sampled", name: "10% sampled, OTLP/HTTP export", env: otlpSampledEnv },
];
const MODES = ALL_MODES.filter((m) => (args.get("--modes") ?? "off,on,nosink,sinkall,otlp,sampled").split(",").includes(m.key));

/** A stand-in collector: accepts OTLP/HTTP trace exports and counts them. */
async function startOtlpReceiver(): Promise<{ url: string; bytes: () => number; close: () => Promise<void> }> {
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => (bytes += chunk.length));
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, bytes: () => bytes, close: () => new Promise((r) => server.close(() => r())) };
}

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
  /** OTLP/HTTP bytes received by the stand-in collector. */
  otlpBytes: number;
}

/** User + system CPU time of a process so far, ms (Linux /proc; clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}


function startSystemProcess(url: string, mode: Mode): ChildProcess {
  return spawnZeroLatencySystem(url, {
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: "", ...mode.env },
    nodeArgs: cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", `${cpuProfDir}/${mode.key}`] : [],
    // --pin: the services on the last core, this process and nats-server on the others.
    wrap: pin ? ["taskset", "-c", String(availableParallelism() - 1)] : [],
  });
}

async function round(url: string, nc: NatsConnection, mode: Mode, otlpBytes: () => number): Promise<Run> {
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
    await client.waitUntilServing(30_000, 2_000);
    let i = 0;
    const call = () => client.generate({ prompt: `a photo of object ${i++ % 5000}`, deadlineMs: 30_000 });
    await closedLoop(50, 2, call); // warm-up
    sinkMessages = 0;
    sinkBytes = 0;
    const otlpBefore = otlpBytes();
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
      otlpBytes: otlpBytes() - otlpBefore,
    };
  } finally {
    sub.unsubscribe();
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}

/** Encoding cost of an OTLP export, µs per span, over 1,024 spans shaped like a worker's. */
function serializerCosts(): Record<string, { usPerSpan: number; bytesPerSpan: number }> {
  const exporter = new InMemorySpanExporter();
  configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, exporters: [exporter] });
  const t = new ServiceTelemetry("hadis-worker", null, "w-00");
  const root = t.start("light sd35-large-turbo", { kind: SpanKind.PRODUCER });
  for (let i = 0; i < 1_024; i++) {
    const attributes = { "hadis.model": "sd35-large-turbo", "hadis.worker_id": "w-03", "hadis.batch_size": 8, "hadis.request_id": `r${1e9 + i}` };
    t.start(i % 2 ? "execute sd35-large-turbo" : "queue sd35-large-turbo", { kind: SpanKind.CONSUMER, attributes }, root.spanContext()).end();
  }
  const spans: ReadableSpan[] = exporter.getFinishedSpans();
  configureTelemetry({ enabled: false });
  const encoders: Record<string, (s: ReadableSpan[]) => Uint8Array | undefined> = {
    "OTLP JSON (OpenTelemetry)": (x) => JsonTraceSerializer.serializeRequest(x),
    "OTLP protobuf (OpenTelemetry)": (x) => ProtobufTraceSerializer.serializeRequest(x),
    "OTLP protobuf (ours)": encodeTraceRequest,
  };
  const out: Record<string, { usPerSpan: number; bytesPerSpan: number }> = {};
  for (const [name, encode] of Object.entries(encoders)) {
    let bytes = 0;
    for (let i = 0; i < 20; i++) bytes = encode(spans)!.length; // warm-up
    const times: number[] = [];
    for (let r = 0; r < 15; r++) {
      const start = performance.now();
      for (let i = 0; i < 10; i++) encode(spans);
      times.push(((performance.now() - start) * 1e3) / (10 * spans.length));
    }
    out[name] = { usPerSpan: r2(median(times)), bytesPerSpan: Math.round(bytes / spans.length) };
  }
  return out;
}

async function main() {
  const serializers = serializerCosts();
  console.table(serializers);
  const server = await startNatsServer();
  const nc = await connectNats(server.url, "bench-tracing");
  const otlp = await startOtlpReceiver();
  Object.assign(otlpEnv, { ...ALWAYS, HADIS_SPAN_SINK: "on", OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url });
  Object.assign(otlpSampledEnv, {
    HADIS_TRACING: "on",
    HADIS_SPAN_SINK: "on",
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.1",
  });
  const runs: Run[] = [];
  // Each round starts with a different mode (a run's place in the round must not favour a mode).
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < MODES.length; k++) runs.push(await round(server.url, nc, MODES[(k + r) % MODES.length], otlp.bytes));
  }
  console.table(runs);
  type Figure = "rps" | "p50Ms" | "p99Ms" | "meanMs" | "cpuMsPerRequest" | "sinkBytes" | "otlpBytes" | "requests";
  // Medians over the rounds; costs are the median of each round's ratio to that round's "off"
  // run (the modes of a round run back to back, so machine drift cancels).
  const mean = (mode: string, k: Figure) => median(runs.filter((x) => x.mode === mode).map((x) => x[k]));
  const off = MODES[0].name;
  // Runs are in round order, so the i-th run of a mode pairs with the i-th "off" run.
  const ratios = (mode: string, f: (run: Run, base: Run) => number) => {
    const mine = runs.filter((x) => x.mode === mode);
    const base = runs.filter((x) => x.mode === off);
    return mine.map((run, i) => f(run, base[i]));
  };
  const perRound = (mode: string, f: (run: Run, base: Run) => number) => median(ratios(mode, f));
  /** The middle half of the rounds' costs: how far one round is from the next on this machine. */
  const quartiles = (mode: string, f: (run: Run, base: Run) => number) => [r2(percentile(ratios(mode, f), 25)), r2(percentile(ratios(mode, f), 75))];
  const cpuCost = (x: Run, b: Run) => (x.cpuMsPerRequest / b.cpuMsPerRequest - 1) * 100;
  const rpsCost = (x: Run, b: Run) => (1 - x.rps / b.rps) * 100;
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
        otlpBytesPerRequest: Math.round(mean(m.name, "otlpBytes") / Math.max(1, mean(m.name, "requests"))),
        // Costs relative to tracing off, percent.
        throughputCostPct: r2(perRound(m.name, rpsCost)),
        throughputCostQuartiles: quartiles(m.name, rpsCost),
        meanLatencyCostPct: r2(perRound(m.name, (x, b) => (x.meanMs / b.meanMs - 1) * 100)),
        cpuCostPct: r2(perRound(m.name, cpuCost)),
        cpuCostQuartiles: quartiles(m.name, cpuCost),
      },
    ]),
  );
  console.log(summary);
  console.log("wrote", writeResult("tracing", { date: new Date().toISOString(), seconds, concurrency, rounds, serializers, runs, summary }));
  await nc.close();
  await otlp.close();
  await server.stop();
}

await main();
