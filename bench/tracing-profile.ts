/**
 * Where tracing's cost goes. One services process (bench/tracing-child.ts) runs under
 * `node --cpu-prof` at a constant closed-loop load while its tracing is switched between the modes
 * (bench/tracing-lib.ts), phase by phase as in bench/tracing.ts (blocks of one phase per mode,
 * `--settle-ms` after each switch, then `--window-ms` counted); the samples of its main thread inside
 * each mode's windows are summed by file (node_modules by package) and by function, divided by the
 * requests completed in them, and printed against the first mode (µs a request). Interleaving
 * cancels most of a shared machine's drift; read this for where the time goes and
 * bench/tracing.ts for how much. With `--alloc`, V8's sampling heap profiler (every allocation,
 * collected or not, started and stopped around each window) replaces the CPU profile: bytes
 * allocated a request, the figure that sets how often the young generation is collected.
 *
 * With `--callers NAME`, the self time of functions named NAME is told apart by their callers
 * (the first three outside Node's own modules) instead: who makes a native call such as a socket's `writeBuffer`.
 * Prints the tables and writes them to bench/results/tracing-profile.json (-alloc, -callers with those options).
 *
 *   node --import tsx bench/tracing-profile.ts [--modes off,otlp] [--seconds 60] [--concurrency 200] [--top 30] [--pin] [--alloc] [--by-base]
 *                                              [--window-ms 600] [--settle-ms 250] [--callers writeBuffer] [--node-args "<flags>"]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startNatsServer } from "../services/nats/server.ts";
import { connectNats } from "../services/nats/connection.ts";
import { HadisClient } from "../services/client/client.ts";
import { blockOrder, placement, pinnedToLastCore, writeResult } from "./lib.ts";
import { ask, modesNamed, phaseOptions, spawnSwitchableSystem, startLoad, startOtlpReceiver, switchTracing } from "./tracing-lib.ts";

const { args, seconds, concurrency, windowMs, settleMs, pin, nodeArgs } = phaseOptions(60);
const top = Number(args.get("--top") ?? 30);
const MODES = modesNamed(args.get("--modes") ?? "off,otlp");
const alloc = process.argv.includes("--alloc");
/** Rows by the first mode's own figures instead of the differences (where the baseline goes). */
const byBase = process.argv.includes("--by-base");
/** Split the self time of the functions of this name by their callers. */
const callersOf = args.get("--callers");

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Self time (µs) by file and by function of the samples inside `windows` (sorted, disjoint; the profile's clock, µs). */
function selfTimes(profile: CpuProfile, windows: [number, number][]): { byFile: Map<string, number>; byFunction: Map<string, number> } {
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const parents = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parents.set(c, n.id);
  /** "caller ← …": the first three callers outside Node's own modules. */
  const chain = (id: number) => {
    const names: string[] = [];
    for (let p = parents.get(id); p !== undefined && names.length < 3; p = parents.get(p)) {
      const frame = frames.get(p)!;
      if (frame.url && !frame.url.startsWith("node:")) names.push(frameNames(frame).fn);
    }
    return names.join(" ← ") || "(Node itself)";
  };
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let t = profile.startTime;
  let w = 0;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i];
    while (w < windows.length && windows[w][1] <= t) w++;
    if (w === windows.length || t < windows[w][0]) return;
    const frame = frames.get(id)!;
    // The thread waiting for work is not time spent on requests.
    if (frame.functionName === "(idle)") return;
    const { file, fn } = frameNames(frame);
    const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + profile.timeDeltas[i]);
    add(byFile, file);
    if (callersOf === undefined) add(byFunction, fn);
    else if (frame.functionName === callersOf) add(byFunction, chain(id));
  });
  return { byFile, byFunction };
}

interface HeapNode {
  callFrame: { functionName: string; url: string };
  selfSize: number;
  children: HeapNode[];
}

/** Where the file and function of a frame are named (node_modules by package, ours relative to the repository). */
function frameNames(frame: { functionName: string; url: string }): { file: string; fn: string } {
  const path = frame.url.replace(/^file:\/\//, "");
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1];
  const file = pkg ? `npm:${pkg}` : path.replace(fileURLToPath(new URL("..", import.meta.url)), "") || frame.functionName;
  return { file, fn: `${frame.functionName || "(anonymous)"} ${file}` };
}

/** Bytes allocated by file and by function in sampling heap profiles. */
function allocations(roots: HeapNode[]): { byFile: Map<string, number>; byFunction: Map<string, number> } {
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  const visit = (node: HeapNode) => {
    const { file, fn } = frameNames(node.callFrame);
    add(byFile, file, node.selfSize);
    add(byFunction, fn, node.selfSize);
    node.children.forEach(visit);
  };
  roots.forEach(visit);
  return { byFile, byFunction };
}

/** The main thread's profile: the busiest one (worker threads idle most of the time). */
function mainProfile(dir: string): CpuProfile {
  const profiles = readdirSync(dir)
    .filter((f) => f.endsWith(".cpuprofile"))
    .map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")) as CpuProfile);
  const busy = (p: CpuProfile) => {
    const idle = new Set(p.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
    return p.samples.filter((id) => !idle.has(id)).length;
  };
  return profiles.sort((a, b) => busy(b) - busy(a))[0];
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "hadis-profile-"));
  const server = await startNatsServer();
  const nc = await connectNats(server.url, "bench-tracing-profile");
  const otlp = await startOtlpReceiver();
  const child = spawnSwitchableSystem(server.url, pin ? pinnedToLastCore() : [], [
    ...nodeArgs,
    ...(alloc ? [] : ["--cpu-prof", "--cpu-prof-dir", dir]),
  ]);
  const measured = MODES.map((mode) => ({ mode, requests: 0, windows: [] as [number, number][], heapFiles: [] as string[] }));
  let load: ReturnType<typeof startLoad> | null = null;
  let cores: ReturnType<typeof placement> | undefined;
  let results: { mode: string; requests: number; byFile: Map<string, number>; byFunction: Map<string, number> }[];
  try {
    try {
      const client = new HadisClient(nc);
      await client.waitUntilServing(30_000, 2_000);
      cores = placement(child.pid!);
      load = startLoad(client, concurrency, 30_000);
      for (const { mode } of measured) {
        await switchTracing(child, mode, otlp.url);
        await new Promise((r) => setTimeout(r, 1_500)); // warm-up
      }
      const end = performance.now() + seconds * 1_000;
      for (let block = 0; performance.now() < end; block++) {
        for (const k of blockOrder(measured.length, block)) {
          const m = measured[k];
          await switchTracing(child, m.mode, otlp.url);
          await new Promise((r) => setTimeout(r, settleMs));
          if (alloc) await ask(child, { alloc: "start" });
          // The profile's clock is the monotonic one of process.hrtime (µs), shared by both processes.
          const fromUs = Number(process.hrtime.bigint() / 1_000n);
          const from = performance.now();
          await new Promise((r) => setTimeout(r, windowMs));
          const to = performance.now();
          m.windows.push([fromUs, Number(process.hrtime.bigint() / 1_000n)]);
          if (alloc) {
            m.heapFiles.push(join(dir, `${m.mode.key}-${block}.heapprofile`));
            await ask(child, { alloc: "stop", file: m.heapFiles.at(-1) });
          }
          m.requests += load.between(from, to).filter((x) => !Number.isNaN(x)).length;
        }
        load.done.splice(0, load.done.length);
      }
    } finally {
      await load?.stop();
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
    const profile = alloc ? null : mainProfile(dir);
    results = measured.map((m) => ({
      mode: m.mode.name,
      requests: m.requests,
      ...(profile
        ? selfTimes(profile, m.windows)
        : allocations(m.heapFiles.map((f) => (JSON.parse(readFileSync(f, "utf8")) as { head: HeapNode }).head))),
    }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await nc.close();
    await otlp.close();
    await server.stop();
  }
  const [base, ...others] = results;
  const unit = alloc ? "bytes" : "µs";
  const tables: { mode: string; by: string; unit: string; base: number; other: number; rows: Record<string, string | number>[] }[] = [];
  for (const other of others) {
    for (const key of ["byFile", "byFunction"] as const) {
      const perRequest = (r: typeof base, k: string) => (r[key].get(k) ?? 0) / r.requests;
      const names = new Set([...base[key].keys(), ...other[key].keys()]);
      const rows = [...names].map((k) => ({
        name: callersOf ? k : k.slice(0, 90),
        [base.mode]: perRequest(base, k),
        [other.mode]: perRequest(other, k),
        extra: perRequest(other, k) - perRequest(base, k),
      }));
      const total = (r: typeof base) => [...r[key].values()].reduce((a, b) => a + b, 0) / r.requests;
      const by = key === "byFile" ? "file" : callersOf ? `${callersOf} by caller` : "function";
      console.log(
        `\n${unit} a request, by ${by}: ${base.mode} ${total(base).toFixed(1)} (${base.requests} requests), ${other.mode} ${total(other).toFixed(1)} (${other.requests} requests); largest differences`,
      );
      const shown = rows
        .sort((a, b) => (byBase ? Number(b[base.mode]) - Number(a[base.mode]) : b.extra - a.extra))
        .slice(0, top)
        .map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === "number" ? Math.round(v * 100) / 100 : v])));
      console.table(shown);
      tables.push({ mode: other.mode, by, unit, base: total(base), other: total(other), rows: shown });
    }
  }
  const name = `tracing-profile${alloc ? "-alloc" : ""}${callersOf ? "-callers" : ""}`;
  const path = writeResult(name, {
    date: new Date().toISOString(),
    cores,
    nodeArgs,
    seconds,
    concurrency,
    windowMs,
    settleMs,
    requests: Object.fromEntries(results.map((r) => [r.mode, r.requests])),
    tables,
  });
  console.log(`wrote ${path}`);
}

await main();
