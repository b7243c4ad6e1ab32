/**
 * What flags of the services' node (`--node-args`, e.g. a larger young generation) do to the
 * pipeline. Two systems (zero-latency profile models, as in bench/tracing.ts), A with the services'
 * node as `npm start` runs it and B with the flags, each on a nats-server of its own, both on the
 * same core with `--pin`, are loaded in turn: blocks of one phase per system, each phase starting
 * a closed loop of `--concurrency` callers on one system, letting `--settle-ms` pass, counting
 * `--window-ms` (requests, CPU time per thread, main-thread GC pauses), then stopping the loop (its
 * requests finish) before the other's phase. B's figures are read per block against A's, seconds
 * apart, so a shared machine's drift hits both alike: median over blocks and quartiles. Both
 * systems trace as `--mode` says (bench/tracing-lib.ts; default off).
 *
 *   node --import tsx bench/node-flags.ts --node-args "--max-semi-space-size=32" [--seconds 120] [--mode off]
 *                                         [--concurrency 200] [--window-ms 600] [--settle-ms 250] [--pin]
 */
import { startNatsServer } from "../services/nats/server.ts";
import { connectNats } from "../services/nats/connection.ts";
import { HadisClient } from "../services/client/client.ts";
import { placement, median, percentile, pinnedToLastCore, r2, writeResult } from "./lib.ts";
import {
  cpuMsBetween,
  gcPausesMs,
  modesNamed,
  phaseOptions,
  spawnSwitchableSystem,
  startLoad,
  startOtlpReceiver,
  switchTracing,
  threadCpuNs,
} from "./tracing-lib.ts";

const { args, seconds, concurrency, windowMs, settleMs, pin, nodeArgs } = phaseOptions(120);
const modeKey = args.get("--mode") ?? "off";
const mode = modesNamed(`off,${modeKey}`).find((m) => m.key === modeKey)!;

interface Phase {
  block: number;
  system: "A" | "B";
  rps: number;
  cpuMsPerRequest: number;
  gcMsPerRequest: number;
}

async function main() {
  if (nodeArgs.length === 0) throw new Error('--node-args "<flags>": the flags of system B');
  const otlp = await startOtlpReceiver();
  const wrap = pin ? pinnedToLastCore() : [];
  const systems = [];
  for (const name of ["A", "B"] as const) {
    const server = await startNatsServer();
    const nc = await connectNats(server.url, `bench-node-flags-${name}`);
    const child = spawnSwitchableSystem(server.url, wrap, name === "B" ? nodeArgs : []);
    systems.push({ name, server, nc, child, client: new HadisClient(nc) });
  }
  const phases: Phase[] = [];
  const cores: ReturnType<typeof placement>[] = [];
  try {
    for (const s of systems) {
      await s.client.waitUntilServing(30_000, 2_000);
      cores.push(placement(s.child.pid!));
      await switchTracing(s.child, mode, otlp.url);
      const warm = startLoad(s.client, concurrency, 30_000);
      await new Promise((r) => setTimeout(r, 3_000));
      await warm.stop();
    }
    const end = performance.now() + seconds * 1_000;
    for (let block = 0; performance.now() < end; block++) {
      for (let k = 0; k < systems.length; k++) {
        const s = systems[(k + block) % systems.length];
        const load = startLoad(s.client, concurrency, 30_000);
        await new Promise((r) => setTimeout(r, settleMs));
        const gc0 = await gcPausesMs(s.child);
        const cpu0 = threadCpuNs(s.child.pid!);
        const from = performance.now();
        await new Promise((r) => setTimeout(r, windowMs));
        const to = performance.now();
        const cpu1 = threadCpuNs(s.child.pid!);
        const gc1 = await gcPausesMs(s.child);
        await load.stop();
        const requests = load.between(from, to).filter((x) => !Number.isNaN(x)).length;
        phases.push({
          block,
          system: s.name,
          rps: Math.round(requests / ((to - from) / 1_000)),
          cpuMsPerRequest: cpuMsBetween(cpu0, cpu1) / Math.max(1, requests),
          gcMsPerRequest: (gc1 - gc0) / Math.max(1, requests),
        });
      }
    }
  } finally {
    for (const s of systems) {
      s.child.kill("SIGTERM");
      await new Promise((r) => s.child.once("exit", r));
      await s.nc.close();
      await s.server.stop();
    }
    await otlp.close();
  }
  const blocks = Math.max(...phases.map((p) => p.block)) + 1;
  const of = (system: string, k: "rps" | "cpuMsPerRequest" | "gcMsPerRequest") =>
    median(phases.filter((p) => p.system === system).map((p) => p[k]));
  const change = (k: "rps" | "cpuMsPerRequest" | "gcMsPerRequest") => {
    const r = phases
      .filter((p) => p.system === "B")
      .map((b) => (b[k] / phases.find((a) => a.block === b.block && a.system === "A")![k] - 1) * 100);
    return { median: r2(median(r)), quartiles: [r2(percentile(r, 25)), r2(percentile(r, 75))] };
  };
  const summary = {
    A: {
      rps: Math.round(of("A", "rps")),
      cpuMsPerRequest: r2(of("A", "cpuMsPerRequest") * 1e3) / 1e3,
      gcMsPerRequest: r2(of("A", "gcMsPerRequest") * 1e3) / 1e3,
    },
    B: {
      rps: Math.round(of("B", "rps")),
      cpuMsPerRequest: r2(of("B", "cpuMsPerRequest") * 1e3) / 1e3,
      gcMsPerRequest: r2(of("B", "gcMsPerRequest") * 1e3) / 1e3,
    },
    // B against A, percent: median over blocks and quartiles.
    throughputChangePct: change("rps"),
    cpuChangePct: change("cpuMsPerRequest"),
    gcChangePct: change("gcMsPerRequest"),
  };
  console.log(`${blocks} blocks of A (default) and B (${nodeArgs.join(" ")}), tracing ${mode.name}, ${concurrency} callers`);
  console.table({ A: summary.A, B: summary.B });
  console.table({
    "throughput, B vs A (%)": { median: summary.throughputChangePct.median, quartiles: summary.throughputChangePct.quartiles.join(" … ") },
    "CPU a request, B vs A (%)": { median: summary.cpuChangePct.median, quartiles: summary.cpuChangePct.quartiles.join(" … ") },
    "GC pauses a request, B vs A (%)": { median: summary.gcChangePct.median, quartiles: summary.gcChangePct.quartiles.join(" … ") },
  });
  console.log(
    "wrote",
    writeResult("node-flags", {
      date: new Date().toISOString(),
      nodeArgs,
      mode: mode.key,
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
}

await main();
