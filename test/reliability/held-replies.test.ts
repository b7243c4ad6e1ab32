/**
 * Verdicts and replies across a dropped connection. nats.js drops what is published while its
 * connection is down, and the server drops a reply to an inbox nobody holds meanwhile. So a
 * discriminator holds a verdict reached while it is cut off until it is back, a router whose
 * connection drops while it waits for a verdict asks again once reconnected, and a router holds
 * a finished reply until it is back. Each is cut off by a TCP proxy while the others keep their
 * connections; the judge the router asks is this test, answering when it chooses.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Packr } from "msgpackr";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, watchConnection, type Msg, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import { startDiscriminator } from "../../services/discriminator/main.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { encode } from "../../contracts/envelope.ts";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import type { RunningSystem } from "../../services/system.ts";
import { startTestServices } from "../helpers/system.ts";
import { startProxy, type Proxy } from "../helpers/proxy.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { waitFor } from "../helpers/processes.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";

const JUDGE_WAIT_MS = 3_000;
const packr = new Packr({ useRecords: false });
const verdict = (score: number) => encode({ v: 1, score, threshold: 0.5, accept: score >= 0.5, planEpoch: 1, judgeMs: 1 });

let server: LocalServer;
let routerProxy: Proxy;
let discProxy: Proxy;
let back: RunningSystem;
let front: RunningSystem;
let nc: NatsConnection;
let client: HadisClient;
const light = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold).light;

beforeAll(async () => {
  server = await startNatsServer();
  routerProxy = await startProxy(server.port);
  discProxy = await startProxy(server.port);
  // No discriminator: this test answers the router's judge requests.
  // Verdicts come from the discriminator here (the workers do not judge): its hop is what is cut.
  back = await startTestServices(server.url, { services: ["resource-manager", "worker"], judgeOnWorker: false });
  front = await startTestServices(routerProxy.url, { services: ["router"], judgeTimeoutMs: JUDGE_WAIT_MS, judgeOnWorker: false });
  nc = await connectNats(server.url, "test");
  client = new HadisClient(nc);
}, 30_000);

afterAll(async () => {
  await nc?.close();
  await front?.stop(2_000);
  await back?.stop(2_000);
  await routerProxy?.close();
  await discProxy?.close();
  await server?.stop();
});

/** Collects the router's judge requests while `fn` runs. */
async function judging<T>(fn: (asked: Msg[]) => Promise<T>): Promise<T> {
  const asked: Msg[] = [];
  const sub = nc.subscribe(front.subjects.judge, { callback: (_err, msg) => void asked.push(msg) });
  try {
    return await fn(asked);
  } finally {
    sub.unsubscribe();
  }
}

describe("verdicts and replies across a dropped connection", () => {
  it("a discriminator holds a verdict reached while its connection is down, and sends it once back", async () => {
    const s = buildSubjects("held-verdict");
    const release: (() => void)[] = [];
    const judge = {
      kind: "slow",
      score: () => new Promise<number[]>((r) => release.push(() => r([0.7]))),
      thresholdFor: () => 0.5,
      close: async () => undefined,
    };
    const discNc = await connectNats(discProxy.url, "discriminator");
    const disc = await startDiscriminator({ nc: discNc, subjects: s, judge, models: ["m"], log: createLogger("test", "silent") });
    await discNc.flush(); // its subscription is at the server before this test's connection asks
    try {
      const asked = nc.request(
        s.judge,
        encode({ v: 1, requestId: "r1", prompt: "a cat", model: "m", image: new Uint8Array([1]), planEpoch: 0 }),
        { timeout: 6_000 },
      );
      await waitFor(() => release.length === 1, 5_000, "the image being judged");
      discProxy.cut(1_500);
      await waitFor(() => !watchConnection(discNc).connected, 2_000, "the discriminator's drop seen");
      release[0](); // the verdict, reached while it is cut off
      const started = Date.now();
      expect(packr.unpack((await asked).data)).toMatchObject({ score: 0.7, accept: true });
      console.log(`verdict reached while cut off: sent ${Date.now() - started} ms later, once reconnected`);
    } finally {
      await disc.stop(1_000);
      await discNc.close();
    }
  }, 20_000);

  it("a router whose connection drops while it waits for a verdict asks again once back, and serves that verdict", async () => {
    const reply = await judging(async (asked) => {
      const answer = client.generate({ prompt: light, seed: 1, deadlineMs: 10_000 }, { timeoutMs: 9_000 });
      await waitFor(() => asked.length === 1, 5_000, "the first judge request");
      routerProxy.cut(1_000);
      asked[0].respond(verdict(0.11)); // lost: the router holds no inbox while it is cut off
      await waitFor(() => asked.length === 2, JUDGE_WAIT_MS, "the judge asked again after the reconnect");
      asked[1].respond(verdict(0.93));
      return answer;
    });
    expect(reply.route).toBe("light");
    expect(reply.score).toBe(0.93);
  }, 20_000);

  it('a router asks the judge again on "no responders" just after its reconnect, while the judges reconnect too', async () => {
    const asked: Msg[] = [];
    const first = nc.subscribe(front.subjects.judge, { callback: (_err, msg) => void asked.push(msg) });
    const answer = client.generate({ prompt: light, seed: 5, deadlineMs: 10_000 }, { timeoutMs: 9_000 });
    await waitFor(() => asked.length === 1, 5_000, "the first judge request");
    first.unsubscribe(); // no judge now, as after a restarted nats-server
    await nc.flush();
    routerProxy.cut(1_000);
    // The router is back about 1.25 s later, asks again and finds no judge; one is back at 1.8 s.
    await new Promise((r) => setTimeout(r, 1_800));
    const again = nc.subscribe(front.subjects.judge, { callback: (_err, msg) => void msg.respond(verdict(0.93)) });
    try {
      await nc.flush();
      const reply = await answer;
      expect(reply.score).toBe(0.93); // before: "no responders" at once, and the light image served unjudged
    } finally {
      again.unsubscribe();
    }
  }, 20_000);

  it("a router holds a reply finished while its connection is down, and sends it once back", async () => {
    const started = Date.now();
    const { reply, asked } = await judging(async (asked) => {
      const answer = client.generate({ prompt: light, seed: 2, deadlineMs: 10_000 }, { timeoutMs: 9_000 });
      await waitFor(() => asked.length === 1, 5_000, "the judge request");
      // Cut off for longer than it waits for a verdict: it serves the light image unjudged while cut off.
      routerProxy.cut(JUDGE_WAIT_MS + 1_000);
      return { reply: await answer, asked: asked.length };
    });
    expect(reply.route).toBe("light");
    expect(reply.score).toBeUndefined();
    expect(reply.fallback).toBe("judge_failed");
    expect(reply.image.byteLength).toBeGreaterThan(0);
    expect(asked).toBe(1); // not asked again: not reconnected within the wait
    console.log(`reply finished while the router was cut off: answered after ${Date.now() - started} ms`);
  }, 20_000);

  it("a router's demand report that falls while its connection is down goes with the next one, not lost", async () => {
    const router = front.routers[0];
    const arrivals: number[] = [];
    const sub = nc.subscribe(front.subjects.routerStats(router.routerId), {
      callback: (_err, msg) => void arrivals.push(packr.unpack(msg.data).arrivals),
    });
    try {
      // Two reports first (one a second): what came before this test is reported by then.
      await waitFor(() => arrivals.length >= 2, 5_000, "two reports");
      const from = arrivals.length;
      const before = router.stats().received;
      const answers = [0, 1, 2, 3, 4].map((seed) => client.generate({ prompt: light, seed, deadlineMs: 10_000 }, { timeoutMs: 9_000 }));
      // Cut the moment the 5th arrives (a report sent between the two would count them before the cut).
      for (const end = Date.now() + 5_000; router.stats().received < before + 5 && Date.now() < end;)
        await new Promise((r) => setImmediate(r));
      expect(router.stats().received).toBe(before + 5);
      routerProxy.cut(2_500); // over two reports' time
      for (const a of await Promise.all(answers)) expect(a.image.byteLength).toBeGreaterThan(0);
      const sent = arrivals.length;
      await waitFor(() => arrivals.length > sent, 3_000, "a report after the replies");
      // Counted once in all: before, a report that fell in the cut was dropped with its arrivals.
      expect(arrivals.slice(from).reduce((n, a) => n + a, 0)).toBe(5);
    } finally {
      sub.unsubscribe();
    }
  }, 20_000);
});
