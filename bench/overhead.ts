/**
 * The pipeline's own overhead: requests through router → worker → discriminator → reply with
 * zero-latency profile models, next to raw NATS request-reply measured in the same run.
 *
 *   node --import tsx bench/overhead.ts [--seconds 10] [--concurrency 200]
 *
 * The system runs in a child process (as `npm start` would), the load here; one nats-server.
 */
import { startNatsServer } from "../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../services/nats/connection.ts";
import { HadisClient } from "../services/client/client.ts";
import { closedLoop, median, percentile, r2, spawnBenchSystem, writeResult } from "./lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const seconds = Number(args.get("--seconds") ?? 10);
const concurrency = Number(args.get("--concurrency") ?? 200);
const openRates = (args.get("--rates") ?? "250,500,1000").split(",").map(Number);

interface Run {
  label: string;
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
}

function summarize(label: string, latencies: number[], errors: number, elapsedS: number): Run {
  return {
    label,
    requests: latencies.length,
    errors,
    seconds: r2(elapsedS),
    rps: Math.round(latencies.length / elapsedS),
    p50Ms: r2(median(latencies)),
    p99Ms: r2(percentile(latencies, 99)),
    meanMs: r2(latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length)),
  };
}

/** Closed loop, summarized. */
async function closedRun(label: string, n: number, durS: number, call: () => Promise<unknown>): Promise<Run> {
  const { latencies, errors, elapsedS } = await closedLoop(n, durS, call);
  return summarize(label, latencies, errors, elapsedS);
}

/** Open loop: Poisson arrivals at `rate` per second, whatever the replies do. */
async function openLoop(label: string, rate: number, durS: number, call: () => Promise<unknown>): Promise<Run> {
  const latencies: number[] = [];
  let errors = 0;
  const pending: Promise<void>[] = [];
  const started = performance.now();
  let next = started;
  while (next < started + durS * 1000) {
    next += -Math.log(1 - Math.random()) * (1000 / rate);
    const wait = next - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const t = performance.now();
    pending.push(
      call().then(
        () => void latencies.push(performance.now() - t),
        () => void errors++,
      ),
    );
  }
  await Promise.all(pending);
  return summarize(label, latencies, errors, durS);
}

async function main() {
  const server = await startNatsServer();
  // The HADIS planner (as the README's figures were measured), not the static plan.
  const system = spawnBenchSystem(server.url, { policy: "hadis" });
  const nc: NatsConnection = await connectNats(server.url, "bench");
  const client = new HadisClient(nc);
  await client.waitUntilServing(30_000, 2_000);
  const echo = nc.subscribe("bench.echo", { callback: (_e, m) => void m.respond(m.data) });
  const payload = new Uint8Array(160);
  const rawCall = () => nc.request("bench.echo", payload, { timeout: 5_000 });
  let i = 0;
  const hadisCall = () => client.generate({ prompt: `a photo of object ${i++ % 5000}`, deadlineMs: 30_000 });

  // Warm-up both paths.
  await closedRun("warm-up raw", 50, 1, rawCall);
  await closedRun("warm-up hadis", 50, 2, hadisCall);

  const runs: Run[] = [];
  runs.push(await closedRun("raw NATS request-reply, 1 caller", 1, Math.min(3, seconds), rawCall));
  runs.push(await closedRun("HADIS generate, 1 caller", 1, Math.min(3, seconds), hadisCall));
  runs.push(await closedRun(`raw NATS request-reply, ${concurrency} callers`, concurrency, seconds, rawCall));
  runs.push(await closedRun(`HADIS generate, ${concurrency} callers`, concurrency, seconds, hadisCall));
  for (const rate of openRates) runs.push(await openLoop(`HADIS generate, open loop ${rate}/s`, rate, Math.min(5, seconds), hadisCall));

  console.table(runs);
  const raw1 = runs[0];
  const hadis1 = runs[1];
  const summary = {
    addedLatencyAt1CallerP50Ms: r2(hadis1.p50Ms - raw1.p50Ms),
    addedLatencyAt1CallerP99Ms: r2(hadis1.p99Ms - raw1.p99Ms),
    throughputRatioHadisToRaw: r2(runs[3].rps / runs[2].rps),
    hadisMaxRps: runs[3].rps,
  };
  console.log(summary);
  console.log("wrote", writeResult("overhead", { date: new Date().toISOString(), seconds, concurrency, runs, summary }));
  echo.unsubscribe();
  await nc.close();
  system.kill("SIGTERM");
  await new Promise((r) => system.once("exit", r));
  await server.stop();
}

await main();
