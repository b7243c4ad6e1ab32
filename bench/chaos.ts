/**
 * Chaos soak: the system as separate processes on a real nats-server (a resource manager, a
 * discriminator, two routers, three worker processes of four workers), open-loop load, half of
 * it with idempotency keys, while one process at a time is killed (and restarted), frozen, or
 * cut off from the server (each process connects through a TCP proxy of its own, run in a
 * process of their own, `bench/proxies.ts`), and the
 * nats-server itself is restarted once. Then a calm phase.
 *
 *   node --import tsx bench/chaos.ts [--seconds 120] [--calm 30] [--qps 15] [--every-ms 3000]
 *     [--freeze-share 0.3] [--cut-share 0.3] [--nats-restart-at 50] [--seed 1]
 *
 * What must hold: every request ends in an image or a typed error; a request with no reply at
 * all is explained only by a router killed, or the server restarted, between its sending and its
 * deadline, or a router cut off just as it was sent (core NATS is at most once: a request on its
 * way to a router that dies or is cut off is lost, and so is one a dead router held); a reply more than 1 s past the deadline only by a router frozen
 * or cut off meanwhile (a reply waits for the reconnect), or the restart; and in the calm phase (10 s after
 * the last fault) every request is served. A keyed request that got no reply, `no_capacity` or
 * `overloaded` is sent again once with its key, as a client would. Prints the figures, writes
 * `bench/results/chaos.json` and exits 1 when something does not hold.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mulberry32 } from "../actors/profile/stats.ts";
import { HadisError } from "../contracts/errors.ts";
import { HadisClient } from "../services/client/client.ts";
import { startNatsServer } from "../services/nats/server.ts";
import { connectNats } from "../services/nats/connection.ts";
import { writeResult } from "./lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const num = (name: string, fallback: number) => Number(args.get(`--${name}`) ?? fallback);
const config = {
  seconds: num("seconds", 120),
  calmSeconds: num("calm", 30),
  qps: num("qps", 15),
  everyMs: num("every-ms", 3_000),
  freezeShare: num("freeze-share", 0.3),
  cutShare: num("cut-share", 0.3),
  natsRestartAtS: num("nats-restart-at", 50),
  seed: num("seed", 1),
  timeScale: 0.02,
  deadlinesMs: [3_000, 6_000, 15_000],
};
// Faults and load draw from streams of their own: the same seed, the same faults at the same times.
const faultRand = mulberry32(config.seed);
const loadRand = mulberry32(config.seed + 0x9e3779b9);
const pick = <T>(xs: readonly T[], rand: () => number): T => xs[Math.floor(rand() * xs.length)];

const CLI = fileURLToPath(new URL("../services/cli/main.ts", import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), "hadis-chaos-"));
const logDir = mkdtempSync(join(tmpdir(), "hadis-chaos-logs-"));
let server = await startNatsServer({ dataDir });
const port = server.port;

/** A fault: a process killed (restarted at `back`), frozen or cut off until `back`, or the server restarted. */
interface Fault {
  target: string;
  kind: "kill" | "freeze" | "cut" | "restart";
  atMs: number;
  backMs: number;
}
const faults: Fault[] = [];

interface Role {
  name: string;
  args: string[];
  child: ChildProcess | null;
  runs: number;
  /** Its way to the server (every run of it connects through it): a proxy `cut` cuts it off. */
  natsUrl: string;
}
const roleArgs = [
  { name: "manager", args: ["serve", "resource-manager"] },
  { name: "discriminator", args: ["serve", "discriminator"] },
  { name: "router-a", args: ["serve", "router"] },
  { name: "router-b", args: ["serve", "router"] },
  { name: "workers-a", args: ["serve", "worker", "--workers", "4", "--id-prefix", "ga"] },
  { name: "workers-b", args: ["serve", "worker", "--workers", "4", "--id-prefix", "gb"] },
  { name: "workers-c", args: ["serve", "worker", "--workers", "4", "--id-prefix", "gc"] },
];
const proxies = spawn(
  process.execPath,
  ["--import", "tsx", fileURLToPath(new URL("./proxies.ts", import.meta.url)), String(port), ...roleArgs.map((r) => r.name)],
  { stdio: ["ignore", "inherit", "inherit", "ipc"] },
);
const urls = await new Promise<Record<string, string>>((resolve) =>
  proxies.once("message", (m) => resolve((m as { urls: Record<string, string> }).urls)),
);
const roles: Role[] = roleArgs.map((r) => ({ ...r, child: null, runs: 0, natsUrl: urls[r.name] }));

function start(role: Role): void {
  const log = join(logDir, `${role.name}-${role.runs++}.log`);
  const child = spawn(
    process.execPath,
    ["--import", "tsx", CLI, ...role.args, "--nats", role.natsUrl, "--time-scale", String(config.timeScale), "--storage", "file"],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, HADIS_LOG: "info" },
    },
  );
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  child.once("exit", () => writeFileSync(log, out));
  role.child = child;
}

roles.forEach(start);
const nc = await connectNats(server.url, "chaos");
const client = new HadisClient(nc);
await client.waitUntilServing(120_000);
const t0 = Date.now();
const at = () => Date.now() - t0;
console.log(`serving; chaos for ${config.seconds} s, then ${config.calmSeconds} s calm; logs in ${logDir}`);

/** How one request ended. */
interface Outcome {
  i: number;
  keyed: boolean;
  retry: boolean;
  sentMs: number;
  endMs: number;
  deadlineMs: number;
  result: string;
  message?: string;
  /** A light image served without a verdict (the judge failed, there was no time to judge, or the plan judges nothing). */
  unjudged?: boolean;
  /** The reply's `fallback`: why the image is not the one the cascade meant. */
  fallback?: string;
}
const outcomes: Outcome[] = [];
const inFlight = new Set<Promise<void>>();

function send(i: number, prompt: string, deadlineMs: number, key: string | undefined, retry = false): void {
  const sentMs = at();
  const p = client
    .generate({ prompt, deadlineMs, ...(key ? { idempotencyKey: key } : {}) })
    .then(
      (reply) => ({
        result: reply.deduplicated ? "ok (deduplicated)" : "ok",
        unjudged: reply.route === "light" && reply.score === undefined,
        ...(reply.fallback ? { fallback: reply.fallback } : {}),
      }),
      (err: unknown) => {
        if (!(err instanceof HadisError)) return { result: "thrown", message: String(err) };
        return { result: /^no reply within/.test(err.message) ? "no reply" : err.code, message: err.message };
      },
    )
    .then((o) => {
      outcomes.push({ i, keyed: !!key, retry, sentMs, endMs: at(), deadlineMs, ...o });
      const retryable = o.result === "no reply" || o.result === "no_capacity" || o.result === "overloaded";
      if (key && !retry && retryable) send(i, prompt, deadlineMs, key, true);
    })
    .finally(() => inFlight.delete(p));
  inFlight.add(p);
}

const faulting = setInterval(() => {
  if (at() > config.seconds * 1e3) return;
  const role = pick(roles, faultRand);
  const downMs = 500 + Math.floor(faultRand() * 2_500);
  const draw = faultRand();
  const kind = draw < config.freezeShare ? "freeze" : draw < config.freezeShare + config.cutShare ? "cut" : "kill";
  const child = role.child;
  if (!child || child.exitCode !== null) {
    start(role); // one that had exited on its own (a start while the server was down)
    return;
  }
  faults.push({ target: role.name, kind, atMs: at(), backMs: at() + downMs });
  console.log(`${(at() / 1e3).toFixed(1)} s: ${kind} ${role.name} for ${downMs} ms`);
  if (kind === "freeze") {
    child.kill("SIGSTOP");
    setTimeout(() => child.kill("SIGCONT"), downMs);
  } else if (kind === "cut") {
    proxies.send({ cut: role.name, ms: downMs });
  } else {
    child.kill("SIGKILL");
    setTimeout(() => start(role), downMs);
  }
}, config.everyMs);

if (config.natsRestartAtS >= 0) {
  setTimeout(async () => {
    const fault: Fault = { target: "nats-server", kind: "restart", atMs: at(), backMs: 0 };
    faults.push(fault);
    console.log(`${(at() / 1e3).toFixed(1)} s: kill nats-server`);
    server.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 1_500));
    rmSync(join(dataDir, "nats-server.pid"), { force: true });
    server = await startNatsServer({ dataDir, port });
    fault.backMs = at();
    console.log(`${(at() / 1e3).toFixed(1)} s: nats-server back`);
  }, config.natsRestartAtS * 1e3);
}

let offered = 0;
const prompts = [
  "a red bicycle",
  "a lighthouse at dusk",
  "a cat asleep on a windowsill",
  "an astronaut riding a horse, photorealistic, intricate detail",
];
while (at() < (config.seconds + config.calmSeconds) * 1e3) {
  const keyed = loadRand() < 0.5;
  send(
    offered,
    `${pick(prompts, loadRand)} ${offered % 97}`,
    pick(config.deadlinesMs, loadRand),
    keyed ? `chaos-${config.seed}-${offered}` : undefined,
  );
  offered++;
  await new Promise((r) => setTimeout(r, -Math.log(1 - loadRand()) * (1e3 / config.qps)));
}
clearInterval(faulting);
while (inFlight.size > 0) await Promise.all([...inFlight]);

// What explains a request with no reply: a router killed, or the server restarted, between its
// sending and its deadline (a router answers by then at the latest). A kill counts from 0.5 s
// before the sending: a killed process takes a moment to die on a loaded machine, and the server
// a moment to notice, and a request given to it meanwhile dies with it. A router cut off explains
// only a request on its way to it then (sent from 0.5 s before the cut to 0.2 s after it): one
// it holds is answered once it is back (cuts are shorter than any caller's wait).
const lostWith = (o: Outcome) =>
  faults.some(
    (f) =>
      ((f.kind === "restart" || (f.kind === "kill" && f.target.startsWith("router"))) &&
        f.atMs >= o.sentMs - 500 &&
        f.atMs <= o.sentMs + o.deadlineMs + 200) ||
      (f.kind === "cut" && f.target.startsWith("router") && f.atMs >= o.sentMs - 200 && f.atMs <= o.sentMs + 500),
  );
// What explains a reply past the deadline: a router frozen or cut off meanwhile (its reply waits
// for the reconnect), or the server restarted (a keyed request is then sent again, and may be
// served what was made for it, after its deadline).
const delayedBy = (o: Outcome) =>
  faults.some(
    (f) =>
      (((f.kind === "freeze" || f.kind === "cut") && f.target.startsWith("router")) || f.kind === "restart") &&
      f.atMs <= o.endMs &&
      Math.max(f.backMs, f.atMs) >= o.sentMs,
  );
/** Outcomes counted by result. */
function tally(list: Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of list) counts[o.result] = (counts[o.result] ?? 0) + 1;
  return counts;
}
const counts = tally(outcomes);
const unexplained = outcomes.filter((o) => (o.result === "no reply" || o.result === "thrown") && !lostWith(o));
const late = outcomes.filter((o) => o.result !== "no reply" && o.endMs - o.sentMs > o.deadlineMs + 1_000 && !delayedBy(o));
const lastFaultMs = Math.max(0, ...faults.map((f) => Math.max(f.atMs, f.backMs)));
const calm = outcomes.filter((o) => o.sentMs > lastFaultMs + 10_000);
const calmFailed = calm.filter((o) => !o.result.startsWith("ok"));
const keyedRetries = outcomes.filter((o) => o.retry);
const keyedLost = outcomes.filter((o) => o.keyed && !o.retry && o.result === "no reply");
const summary = {
  offered,
  outcomes: counts,
  noReplyExplained: outcomes.filter((o) => o.result === "no reply").length - unexplained.filter((o) => o.result === "no reply").length,
  unexplained: unexplained.length,
  lateReplies: late.length,
  unjudged: outcomes.filter((o) => o.unjudged).length,
  fallbacks: outcomes.reduce<Record<string, number>>((n, o) => (o.fallback ? ((n[o.fallback] = (n[o.fallback] ?? 0) + 1), n) : n), {}),
  keyedNoReply: keyedLost.length,
  keyedRetries: keyedRetries.length,
  keyedRetryOutcomes: tally(keyedRetries),
  calmRequests: calm.length,
  calmFailed: calmFailed.length,
  faults: Object.fromEntries(["kill", "freeze", "cut", "restart"].map((k) => [k, faults.filter((f) => f.kind === k).length])),
};
console.log(JSON.stringify(summary, null, 1));
for (const o of [...unexplained, ...late, ...calmFailed].slice(0, 20)) console.log("  not held:", JSON.stringify(o));
const path = writeResult("chaos", {
  date: new Date().toISOString(),
  startedAt: new Date(t0).toISOString(),
  config,
  summary,
  faults,
  notHeld: { unexplained, late, calmFailed },
});
console.log(`wrote ${path}`);

for (const r of roles) r.child?.kill("SIGCONT");
for (const r of roles) r.child?.kill("SIGTERM");
await new Promise((r) => setTimeout(r, 3_000));
for (const r of roles) r.child?.kill("SIGKILL");
await nc.close();
proxies.kill();
await server.stop();
rmSync(dataDir, { recursive: true, force: true });
process.exit(unexplained.length + late.length + calmFailed.length > 0 ? 1 : 0);
