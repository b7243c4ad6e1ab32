/**
 * What judging on the worker saves per light request: the same light requests through two
 * systems on one nats-server, one whose router asks the discriminator (the hop: router →
 * discriminator → router, the image carried again) and one whose workers judge the image they
 * just made and send the verdict with it. Router-side latency (the reply's `timings.totalMs`, from
 * the router's receipt to its reply) and the client's round trip, medians over every light request
 * served on a verdict, in blocks whose order of the two is shuffled, in one run.
 *
 *   node --import tsx bench/judge-hop.ts [--blocks 10] [--requests 100] [--concurrency 2] [--workers 6]
 *
 * Two operating points: zero latency (generation and judging take no time: the hop alone) and
 * the profiled latencies at `--time-scale` (default 0.1, the paper's compression: the judge's
 * 15 ms a batch is 1.5 ms, run on the worker in one mode and in the discriminator in the other).
 */
import { startNatsServer } from "../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../services/nats/connection.ts";
import { HadisClient } from "../services/client/client.ts";
import { startSystem, type RunningSystem } from "../services/system.ts";
import { createLogger } from "../services/telemetry/log.ts";
import { loadProfiles } from "../services/files/profiles.ts";
import { ProfileJudge } from "../actors/judge/profile-judge.ts";
import { referenceIndexFor } from "../actors/profile/profile-set.ts";
import type { StaticConfig } from "../actors/control/static-policy.ts";
import { blockOrder, median, percentile, r2, writeResult } from "./lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const blocks = Number(args.get("--blocks") ?? 10);
const perPhase = Number(args.get("--requests") ?? 100);
const concurrency = Number(args.get("--concurrency") ?? 2);
const workers = Number(args.get("--workers") ?? 6);
const timeScale = Number(args.get("--time-scale") ?? 0.1);

/**
 * Every prompt light (router share 0), 5% of light images escalated so the judge runs on each; the
 * prompts sent are those the judge accepts (`acceptedPrompts`), so no caller waits on the heavy model.
 */
const STATIC: StaticConfig = {
  light: "sdxl-lightning",
  heavy: "sd35-large",
  routerThreshold: 0,
  discThreshold: 0.05,
  lightBatchSize: 1,
  heavyBatchSize: 1,
};

const MODES = ["hop", "worker"] as const;
type Mode = (typeof MODES)[number];

interface Side {
  mode: Mode;
  system: RunningSystem;
  client: HadisClient;
  /** Judge requests seen on this system's judge subject. */
  judgeRequests: () => number;
  routerMs: number[];
  clientMs: number[];
  /** Light requests not served on a verdict (escalated, or a fallback), left out of the medians. */
  other: number;
  errors: number;
}

async function startSide(url: string, nc: NatsConnection, mode: Mode, zeroLatency: boolean, point: string): Promise<Side> {
  const prefix = `jh${point}${mode}`;
  const system = await startSystem({
    natsUrl: url,
    subjectPrefix: prefix,
    workerIdPrefix: `${prefix}w`,
    workers,
    timeScale,
    zeroLatency,
    policy: "static",
    staticConfig: STATIC,
    scorer: "reference",
    judgeOnWorker: mode === "worker",
    workQueue: { storage: "memory" },
    log: createLogger("bench", "error"),
  });
  const client = new HadisClient(nc, prefix);
  await client.waitUntilServing(60_000, 5_000);
  let judged = 0;
  nc.subscribe(`${prefix}.judge`, { callback: () => void judged++ });
  await nc.flush();
  return { mode, system, client, judgeRequests: () => judged, routerMs: [], clientMs: [], other: 0, errors: 0 };
}

/** `perPhase` light requests through `side`, `concurrency` at a time. */
async function phase(side: Side, prompts: readonly string[], offset: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < perPhase) {
        const i = next++;
        const started = performance.now();
        try {
          const reply = await side.client.generate({ prompt: prompts[(offset + i) % prompts.length], seed: i });
          const tookMs = performance.now() - started;
          if (reply.route !== "light" || reply.score === undefined || reply.fallback !== undefined) side.other++;
          else {
            side.routerMs.push(reply.timings.totalMs);
            side.clientMs.push(tookMs);
          }
        } catch {
          side.errors++;
        }
      }
    }),
  );
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

/** The router's `totalMs` is whole milliseconds (its clock is `Date.now()`): its mean, over many requests, resolves what its median cannot. */
const summary = (side: Side) => ({
  requests: side.routerMs.length,
  otherLight: side.other,
  errors: side.errors,
  judgeRequests: side.judgeRequests(),
  routerMedianMs: r2(median(side.routerMs)),
  routerMeanMs: r2(mean(side.routerMs)),
  routerP90Ms: r2(percentile(side.routerMs, 90)),
  clientMedianMs: r2(median(side.clientMs)),
  clientMeanMs: r2(mean(side.clientMs)),
  clientP90Ms: r2(percentile(side.clientMs, 90)),
});

async function operatingPoint(url: string, nc: NatsConnection, zeroLatency: boolean, prompts: readonly string[]) {
  const point = zeroLatency ? "z" : "p";
  const sides = [] as Side[];
  for (const mode of MODES) sides.push(await startSide(url, nc, mode, zeroLatency, point));
  // A warm-up phase each, not counted.
  for (const side of sides) await phase(side, prompts, 0);
  for (const side of sides) {
    side.routerMs.length = 0;
    side.clientMs.length = 0;
    side.other = 0;
    side.errors = 0;
  }
  const judgedBefore = sides.map((s) => s.judgeRequests());
  for (let b = 0; b < blocks; b++) for (const i of blockOrder(sides.length, b)) await phase(sides[i], prompts, (b + 1) * perPhase);
  const [hop, worker] = sides.map((side, i) => ({ ...summary(side), judgeRequests: side.judgeRequests() - judgedBefore[i] }));
  for (const side of sides) await side.system.stop(2_000);
  const saved = {
    routerMedianMs: r2(hop.routerMedianMs - worker.routerMedianMs),
    routerMeanMs: r2(hop.routerMeanMs - worker.routerMeanMs),
    clientMedianMs: r2(hop.clientMedianMs - worker.clientMedianMs),
  };
  const label = zeroLatency ? "zero latency (the hop alone)" : `profiled latencies × ${timeScale}`;
  console.log(`\n${label}: ${hop.requests} + ${worker.requests} light requests judged`);
  console.log(
    `  hop to the discriminator: router median ${hop.routerMedianMs} ms (mean ${hop.routerMeanMs}, p90 ${hop.routerP90Ms}), client ${hop.clientMedianMs} ms; judge requests ${hop.judgeRequests}`,
  );
  console.log(
    `  judged on the worker:     router median ${worker.routerMedianMs} ms (mean ${worker.routerMeanMs}, p90 ${worker.routerP90Ms}), client ${worker.clientMedianMs} ms; judge requests ${worker.judgeRequests}`,
  );
  console.log(
    `  saved per light request:  router ${saved.routerMedianMs} ms median (whole ms), ${saved.routerMeanMs} ms mean; client ${saved.clientMedianMs} ms median`,
  );
  return { zeroLatency, timeScale: zeroLatency ? null : timeScale, hop, worker, saved };
}

/** The reference prompts whose light image the profile judge accepts under `STATIC` (the judge is deterministic per prompt). */
function acceptedPrompts(): string[] {
  const profiles = loadProfiles();
  const cut = new ProfileJudge(profiles, { latencyMs: 0, sleep: async () => undefined }).thresholdFor(STATIC.light, STATIC.discThreshold);
  const scores = profiles.reference.scores.get(STATIC.light)!;
  return profiles.reference.prompts.filter((p) => scores[referenceIndexFor(profiles, p).index] >= cut);
}

async function main() {
  const server = await startNatsServer();
  const nc = await connectNats(server.url, "bench");
  const prompts = acceptedPrompts();
  console.log(`${prompts.length} prompts whose light image is accepted`);
  try {
    const points = [];
    for (const zeroLatency of [true, false]) points.push(await operatingPoint(server.url, nc, zeroLatency, prompts));
    const path = writeResult("judge-hop", {
      command: `node --import tsx bench/judge-hop.ts ${process.argv.slice(2).join(" ")}`.trim(),
      blocks,
      requestsPerPhase: perPhase,
      concurrency,
      workersPerSystem: workers,
      staticConfig: STATIC,
      imageBytes: "the profile backend's placeholder PNG (16×16)",
      points,
      at: new Date().toISOString(),
    });
    console.log(`\nwrote ${path}`);
  } finally {
    await nc.close();
    await server.stop();
  }
}

await main();
