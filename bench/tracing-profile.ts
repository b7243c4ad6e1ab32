/**
 * Where tracing's cost goes: for each mode (bench/tracing-lib.ts), the services process runs under
 * `node --cpu-prof` at a constant closed-loop load; the samples of its main thread inside the
 * counted window are summed by file (node_modules by package) and by function, divided by the
 * requests completed, and printed against the first mode (µs a request). One process per mode,
 * so machine drift between them is not cancelled: read it for where the time goes, and
 * bench/tracing.ts for how much.
 *
 *   node --import tsx bench/tracing-profile.ts [--modes off,otlp] [--seconds 12] [--concurrency 200] [--top 30] [--pin]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startNatsServer } from "../services/lib/nats-server.ts";
import { connectNats } from "../services/lib/nats.ts";
import { HadisClient } from "../services/lib/client.ts";
import { modesNamed, spawnSwitchableSystem, startLoad, startOtlpReceiver, switchTracing } from "./tracing-lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const seconds = Number(args.get("--seconds") ?? 12);
const concurrency = Number(args.get("--concurrency") ?? 200);
const top = Number(args.get("--top") ?? 30);
const pin = process.argv.includes("--pin");
const MODES = modesNamed(args.get("--modes") ?? "off,otlp");

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Self time (µs) by file and by function of the samples between `fromUs` and `toUs` (the profile's clock). */
function selfTimes(profile: CpuProfile, fromUs: number, toUs: number): { byFile: Map<string, number>; byFunction: Map<string, number> } {
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let t = profile.startTime;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i];
    if (t < fromUs || t >= toUs) return;
    const frame = frames.get(id)!;
    const path = frame.url.replace(/^file:\/\//, "");
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1];
    const file = pkg ? `npm:${pkg}` : path.replace(fileURLToPath(new URL("..", import.meta.url)), "") || frame.functionName;
    const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + profile.timeDeltas[i]);
    add(byFile, file);
    add(byFunction, `${frame.functionName || "(anonymous)"} ${pkg ? `npm:${pkg}` : file}`);
  });
  return { byFile, byFunction };
}

/** The main thread's profile: the busiest one (worker threads idle most of the time). */
function mainProfile(dir: string): CpuProfile {
  const profiles = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile")).map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")) as CpuProfile);
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
  const results: { mode: string; requests: number; byFile: Map<string, number>; byFunction: Map<string, number> }[] = [];
  try {
    for (const mode of MODES) {
      const child = spawnSwitchableSystem(server.url, pin ? ["taskset", "-c", String(availableParallelism() - 1)] : [], ["--cpu-prof", "--cpu-prof-dir", join(dir, mode.key)]);
      const client = new HadisClient(nc);
      await client.waitUntilServing(30_000, 2_000);
      await switchTracing(child, mode, otlp.url);
      const load = startLoad(client, concurrency, 30_000);
      await new Promise((r) => setTimeout(r, 4_000)); // warm-up
      // The profile's clock is the monotonic one of process.hrtime (µs), shared by both processes.
      const fromUs = Number(process.hrtime.bigint() / 1_000n);
      const from = performance.now();
      await new Promise((r) => setTimeout(r, seconds * 1_000));
      const toUs = Number(process.hrtime.bigint() / 1_000n);
      const requests = load.between(from, performance.now()).filter((x) => !Number.isNaN(x)).length;
      await load.stop();
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      results.push({ mode: mode.name, requests, ...selfTimes(mainProfile(join(dir, mode.key)), fromUs, toUs) });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await nc.close();
    await otlp.close();
    await server.stop();
  }
  const [base, ...others] = results;
  for (const other of others) {
    for (const key of ["byFile", "byFunction"] as const) {
      const perRequest = (r: typeof base, k: string) => (r[key].get(k) ?? 0) / r.requests;
      const names = new Set([...base[key].keys(), ...other[key].keys()]);
      const rows = [...names].map((k) => ({ name: k.slice(0, 90), [base.mode]: perRequest(base, k), [other.mode]: perRequest(other, k), extra: perRequest(other, k) - perRequest(base, k) }));
      const total = (r: typeof base) => [...r[key].values()].reduce((a, b) => a + b, 0) / r.requests;
      console.log(`\nµs a request, ${key === "byFile" ? "by file" : "by function"}: ${base.mode} ${total(base).toFixed(1)} (${base.requests} requests), ${other.mode} ${total(other).toFixed(1)} (${other.requests} requests); largest differences`);
      console.table(rows.sort((a, b) => b.extra - a.extra).slice(0, top).map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === "number" ? Math.round(v * 100) / 100 : v]))));
    }
  }
}

await main();
