/**
 * What tracing costs the pipeline. One system (16 workers on zero-latency profile models, as in
 * bench/overhead.ts, so the serving layer's own CPU is the bottleneck; or with `--time-scale` the
 * profiled model latencies times it, as the pipeline runs for real) serves a constant closed loop
 * of `--concurrency` callers while the bench switches its tracing configuration every phase
 * (bench/tracing-child.ts, over Node's IPC): blocks of one phase per mode, in an order shuffled
 * per block (`blockOrder`), for `--seconds` in all. A phase lets `--settle-ms` pass after the
 * switch (requests begun under the previous mode finish: keep it above the p99 latency), then counts for `--window-ms` the requests
 * completed, their latencies, the services' CPU time (per thread, in nanoseconds), their main
 * thread's garbage-collection pauses and each core's busy share (with `--pin` the services' core
 * should read 1: the run is CPU-bound there, not on the bench's side). Costs are each block's
 * ratio to its own "off" phase, seconds apart, so the drift of a shared machine (±30% between runs a minute apart here) hits
 * both sides alike; the summary gives the median over blocks and the quartiles. Where the
 * services' core is saturated (`coresBusy` near 1), CPU a request is about 1/throughput, so the
 * CPU cost restates the throughput cost rather than measuring something else.
 *
 * Modes: off; off again (a second "off" phase per block: the cost the method reads where there
 * is none); on (the `npm start` default: the dashboard's 20 traces a second recorded, the rest
 * only decided); on with every trace to the dashboard's sink; every span recorded and handed to a
 * processor that drops it (`record`: the recording part of the next); every span exported over
 * OTLP/HTTP (to a stand-in collector here); 10% of requests sampled and exported. Writes
 * bench/results/tracing.json (tracing-profiled.json with `--time-scale`), with the median and p50
 * latency of every mode.
 *
 *   node --import tsx bench/tracing.ts [--seconds 120] [--concurrency 200] [--window-ms 600] [--settle-ms 250]
 *                                      [--modes off,off2,on,sinkall,record,otlp,sampled]
 *                                      [--pin]   (services on the last core; start this under `taskset -c 0`)
 *                                      [--node-args "--max-semi-space-size=64"]   (flags of the services' node)
 *                                      [--time-scale 0.1 --window-ms 2000 --settle-ms 2500]   (profiled latencies: longer phases)
 */
import { startNatsServer } from "../services/nats/server.ts";
import { connectNats } from "../services/nats/connection.ts";
import { HadisClient } from "../services/client/client.ts";
import { spanSinkSubject } from "../services/telemetry/tracing.ts";
import { blockOrder, placement, median, percentile, pinnedToLastCore, r2, writeResult } from "./lib.ts";
import {
  coreTicks,
  coresBusyBetween,
  cpuMsBetween,
  gcPausesMs,
  modesNamed,
  phaseOptions,
  threadCpuNs,
  spawnSwitchableSystem,
  startLoad,
  startOtlpReceiver,
  switchTracing,
} from "./tracing-lib.ts";

const { args, seconds, concurrency, windowMs, settleMs, pin, nodeArgs } = phaseOptions(120);
/** Profiled model latencies times this (0.1: the paper's compression) instead of zero-latency models. */
const timeScale = args.has("--time-scale") ? Number(args.get("--time-scale")) : undefined;

const MODES = modesNamed(args.get("--modes") ?? "off,off2,on,sinkall,record,otlp,sampled");

/** One measured phase. */
interface Phase {
  block: number;
  mode: string;
  requests: number;
  errors: number;
  rps: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU time of the services process per request, ms. */
  cpuMsPerRequest: number;
  /** Garbage-collection pauses of the services' main thread per request, ms. */
  gcMsPerRequest: number;
  sinkBytes: number;
  otlpBytes: number;
  /** Each core's busy share in the window: the services' core at 1 is what makes the run CPU-bound there. */
  coresBusy: number[];
}

async function main() {
  const server = await startNatsServer();
  const nc = await connectNats(server.url, "bench-tracing");
  const otlp = await startOtlpReceiver();
  // --pin: the services on the last core, this process and nats-server on the others.
  const child = spawnSwitchableSystem(server.url, pin ? pinnedToLastCore() : [], nodeArgs, timeScale);
  const client = new HadisClient(nc);
  let sinkBytes = 0;
  // The dashboard's side of the sink: count what arrives (decoding is the dashboard's cost, not the pipeline's).
  const sub = nc.subscribe(spanSinkSubject(), { callback: (_e, m) => void (sinkBytes += m.data.length) });
  const phases: Phase[] = [];
  let load: ReturnType<typeof startLoad> | null = null;
  let cores: ReturnType<typeof placement>;
  try {
    await client.waitUntilServing(30_000, 2_000);
    cores = placement(child.pid!);
    load = startLoad(client, concurrency, 30_000);
    // Warm-up: every mode's code runs (and is compiled) before anything is measured.
    for (const mode of MODES) {
      await switchTracing(child, mode, otlp.url);
      await new Promise((r) => setTimeout(r, 1_500));
    }
    const end = performance.now() + seconds * 1_000;
    for (let block = 0; performance.now() < end; block++) {
      for (const k of blockOrder(MODES.length, block)) {
        const mode = MODES[k];
        await switchTracing(child, mode, otlp.url);
        await new Promise((r) => setTimeout(r, settleMs));
        const gc0 = await gcPausesMs(child);
        const from = performance.now();
        const [cpu0, sink0, otlp0, ticks0] = [threadCpuNs(child.pid!), sinkBytes, otlp.bytes(), coreTicks()];
        await new Promise((r) => setTimeout(r, windowMs));
        const to = performance.now();
        const [cpu1, sink1, otlp1, ticks1] = [threadCpuNs(child.pid!), sinkBytes, otlp.bytes(), coreTicks()];
        const gc1 = await gcPausesMs(child);
        const inWindow = load.between(from, to);
        const ok = inWindow.filter((x) => !Number.isNaN(x));
        phases.push({
          block,
          mode: mode.name,
          requests: ok.length,
          errors: inWindow.length - ok.length,
          rps: Math.round(ok.length / ((to - from) / 1_000)),
          meanMs: r2(ok.reduce((a, b) => a + b, 0) / Math.max(1, ok.length)),
          p50Ms: r2(percentile(ok, 50)),
          p99Ms: r2(percentile(ok, 99)),
          cpuMsPerRequest: Math.round((cpuMsBetween(cpu0, cpu1) / Math.max(1, ok.length)) * 1000) / 1000,
          gcMsPerRequest: Math.round(((gc1 - gc0) / Math.max(1, ok.length)) * 1e4) / 1e4,
          sinkBytes: sink1 - sink0,
          otlpBytes: otlp1 - otlp0,
          coresBusy: coresBusyBetween(ticks0, ticks1),
        });
      }
      load.done.splice(0, load.done.length);
    }
  } finally {
    await load?.stop();
    sub.unsubscribe();
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
  const blocks = Math.max(...phases.map((p) => p.block)) + 1;
  const off = MODES[0].name;
  /** Each block's value of `f` for a mode against the block's "off" phase. */
  const ratios = (mode: string, f: (x: Phase, base: Phase) => number) =>
    phases
      .filter((p) => p.mode === mode)
      .map((p) =>
        f(
          p,
          phases.find((b) => b.block === p.block && b.mode === off)!,
        ),
      );
  const cost = (mode: string, f: (x: Phase, base: Phase) => number) => {
    const r = ratios(mode, f);
    return { median: r2(median(r)), quartiles: [r2(percentile(r, 25)), r2(percentile(r, 75))] };
  };
  const of = (mode: string, k: keyof Phase) => median(phases.filter((p) => p.mode === mode).map((p) => Number(p[k])));
  const summary = Object.fromEntries(
    MODES.map((m) => [
      m.name,
      {
        rps: Math.round(of(m.name, "rps")),
        meanMs: r2(of(m.name, "meanMs")),
        p50Ms: r2(of(m.name, "p50Ms")),
        p99Ms: r2(of(m.name, "p99Ms")),
        cpuMsPerRequest: Math.round(of(m.name, "cpuMsPerRequest") * 1000) / 1000,
        gcMsPerRequest: Math.round(of(m.name, "gcMsPerRequest") * 1e4) / 1e4,
        errors: phases.filter((p) => p.mode === m.name).reduce((a, p) => a + p.errors, 0),
        sinkBytesPerRequest: Math.round(of(m.name, "sinkBytes") / Math.max(1, of(m.name, "requests"))),
        otlpBytesPerRequest: Math.round(of(m.name, "otlpBytes") / Math.max(1, of(m.name, "requests"))),
        coresBusy: phases[0].coresBusy.map((_, i) => median(phases.filter((p) => p.mode === m.name).map((p) => p.coresBusy[i]))),
        // Costs relative to tracing off, percent: median over blocks and quartiles.
        throughputCostPct: cost(m.name, (x, b) => (1 - x.rps / b.rps) * 100),
        cpuCostPct: cost(m.name, (x, b) => (x.cpuMsPerRequest / b.cpuMsPerRequest - 1) * 100),
        meanLatencyCostPct: cost(m.name, (x, b) => (x.meanMs / b.meanMs - 1) * 100),
        p50LatencyCostPct: cost(m.name, (x, b) => (x.p50Ms / b.p50Ms - 1) * 100),
      },
    ]),
  );
  console.log(
    `${blocks} blocks of ${MODES.length} phases (${settleMs} ms settle + ${windowMs} ms counted), ${concurrency} callers, ${timeScale ? `profiled model latencies x${timeScale}` : "zero-latency models"}`,
  );
  console.table(
    Object.fromEntries(
      Object.entries(summary).map(([k, v]) => [
        k,
        {
          rps: v.rps,
          p50Ms: v.p50Ms,
          cpuMsPerRequest: v.cpuMsPerRequest,
          gcMsPerRequest: v.gcMsPerRequest,
          throughputCostPct: v.throughputCostPct.median,
          throughputIQR: v.throughputCostPct.quartiles.join(" … "),
          p50CostPct: v.p50LatencyCostPct.median,
          p50IQR: v.p50LatencyCostPct.quartiles.join(" … "),
          cpuCostPct: v.cpuCostPct.median,
          cpuIQR: v.cpuCostPct.quartiles.join(" … "),
          otlpBytesPerRequest: v.otlpBytesPerRequest,
          coresBusy: v.coresBusy.join(" "),
          errors: v.errors,
        },
      ]),
    ),
  );
  console.log(
    "wrote",
    writeResult(timeScale ? "tracing-profiled" : "tracing", {
      date: new Date().toISOString(),
      method: "interleaved phases in one process",
      nodeArgs,
      models: timeScale ? `profiled latencies x${timeScale}` : "zero latency",
      cores,
      seconds,
      concurrency,
      windowMs,
      settleMs,
      blocks,
      phases,
      summary,
    }),
  );
  await nc.close();
  await otlp.close();
  await server.stop();
}

await main();
