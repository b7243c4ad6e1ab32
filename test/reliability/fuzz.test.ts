/**
 * Malformed-payload fuzzing of every subject: over 10,000 seeded malformed messages to
 * hadis.generate, hadis.judge, the work queues, the router's results, heartbeats, router stats
 * and the plan KV key. Request-reply subjects answer each with a typed error; the other subjects
 * drop them with a counted reason; good requests sent meanwhile are served; nothing crashes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Packr } from "msgpackr";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { pingServices, serviceStats, startTestSystem, type TestSystem } from "../helpers/system.ts";
import { fuzzPayloads, pooled, type FuzzCase, type FuzzKind } from "../helpers/fuzz.ts";
import { waitFor } from "../helpers/processes.ts";
import { newHeaders, type Msg } from "../../services/nats/connection.ts";
import { decode, encode } from "../../contracts/envelope.ts";
import { ErrorCodes } from "../../contracts/errors.ts";
import { ServiceNames } from "../../contracts/subjects.ts";
import { RouterStatsSchema, WorkerHeartbeatSchema } from "../../contracts/messages.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import type { z } from "zod";

/** The resource manager's count of refused control messages of a kind (this process's metrics). */
async function rejected(kind: string): Promise<number> {
  const line = (await metricsText()).split("\n").find((l) => l.startsWith(`hadis_messages_rejected_total{kind="${kind}"}`));
  return line ? Number(line.split(" ").pop()) : 0;
}

/** Whether `data` decodes as `schema` and passes `check`. */
function decodes<S extends z.ZodType>(schema: S, data: Uint8Array, check: (m: z.infer<S>) => boolean): boolean {
  try {
    return check(decode(schema, data, "fuzz"));
  } catch {
    return false;
  }
}

const packr = new Packr({ useRecords: false });
const WORKER_PREFIX = "fuzzw";
let t: TestSystem;
/** Figures for the report, printed at the end. */
const figures: Record<string, unknown> = {};

beforeAll(async () => {
  t = await startTestSystem({ workers: 4, workerIdPrefix: WORKER_PREFIX });
});
afterAll(async () => {
  console.log(JSON.stringify(figures));
  await t?.stop();
});

/** Background good traffic: one request every `everyMs` until stopped. */
function goodTraffic(everyMs: number) {
  const calls: Promise<unknown>[] = [];
  let i = 0;
  const timer = setInterval(() => calls.push(t.client.generate({ prompt: `a quiet lake number ${i++}`, deadlineMs: 30_000 })), everyMs);
  return async () => {
    clearInterval(timer);
    const settled = await Promise.allSettled(calls);
    return {
      sent: settled.length,
      failed: settled.filter((s) => s.status === "rejected").map((s) => String((s as PromiseRejectedResult).reason)),
    };
  };
}

/** Checks one reply is a typed error, read in the encoding its Content-Type names (a body without a header that reads as JSON is answered in JSON); returns its code. */
function typedError(msg: Msg): string {
  const status = msg.headers?.get("Nats-Service-Error-Code");
  if (!status) throw new Error("reply without Nats-Service-Error-Code");
  const json = msg.headers?.get("Content-Type") === "application/json";
  const body = json ? JSON.parse(new TextDecoder().decode(msg.data)) : packr.unpack(msg.data);
  const code = body?.error?.code;
  if (!(code in ErrorCodes)) throw new Error(`unknown error code ${code}`);
  if (String(ErrorCodes[code as keyof typeof ErrorCodes]) !== status) throw new Error(`status ${status} does not match ${code}`);
  return code;
}

/** Sends cases as requests; every one must come back as a typed error. */
async function fuzzRequests(subject: string, cases: Iterable<FuzzCase>, concurrency: number) {
  const byCode: Record<string, number> = {};
  const byKind: Partial<Record<FuzzKind, number>> = {};
  const failures: string[] = [];
  let sent = 0;
  await pooled(cases, concurrency, async (c) => {
    sent++;
    byKind[c.kind] = (byKind[c.kind] ?? 0) + 1;
    const headers = newHeaders();
    if (c.json) headers.set("Content-Type", "application/json");
    try {
      const msg = await t.nc.request(subject, c.data, { timeout: 10_000, headers });
      const code = typedError(msg);
      byCode[code] = (byCode[code] ?? 0) + 1;
    } catch (err) {
      failures.push(`${c.kind}: ${(err as Error).message}`);
    }
  });
  return { sent, byCode, byKind, failures };
}

async function workerDrops(): Promise<{ malformed: number; expired: number; wrongModel: number }> {
  const msg = await t.nc.request(`hadis.control.worker.${WORKER_PREFIX}`, new Uint8Array(), { timeout: 2_000 });
  const statuses = packr.unpack(msg.data) as { dropped: { malformed: number; expired: number; wrongModel: number } }[];
  return statuses.reduce(
    (s, w) => ({
      malformed: s.malformed + w.dropped.malformed,
      expired: s.expired + w.dropped.expired,
      wrongModel: s.wrongModel + w.dropped.wrongModel,
    }),
    { malformed: 0, expired: 0, wrongModel: 0 },
  );
}

describe("fuzzing every subject with malformed payloads", () => {
  it("answers or drops >10,000 malformed messages, keeps serving, and nothing crashes", async () => {
    const started = Date.now();
    const stopGood = goodTraffic(100);
    const plan = t.system.manager!.plans.current!;
    figures.admission = plan.admission ?? null;
    const served = Object.entries(plan.models)
      .filter(([, a]) => a.workers > 0)
      .map(([m]) => m);
    const routerId = t.system.routers[0].routerId;
    let total = 0;

    // hadis.generate: msgpack and JSON.
    const generate = await fuzzRequests(
      "hadis.generate",
      [
        ...fuzzPayloads({ v: 1, prompt: "a red bicycle", seed: 7, deadlineMs: 20_000, idempotencyKey: "k" }, 3_500, {
          seed: 11,
          hugeBytes: 128 * 1024,
        }),
        ...fuzzPayloads({}, 500, { seed: 12, kinds: ["json"] }),
        // Few in flight: the router's admission bound counts malformed requests too, and good ones must pass.
      ],
      16,
    );
    total += generate.sent;
    figures.generate = generate;
    expect(generate.failures).toEqual([]);

    // hadis.judge.
    const judgeTemplate = {
      v: 1,
      requestId: "r1",
      prompt: "a cat",
      model: plan.pair.light,
      image: new Uint8Array([137, 80, 78, 71]),
      planEpoch: plan.epoch,
    };
    const judge = await fuzzRequests("hadis.judge", fuzzPayloads(judgeTemplate, 2_000, { seed: 21, hugeBytes: 128 * 1024 }), 64);
    total += judge.sent;
    figures.judge = judge;
    expect(judge.failures).toEqual([]);

    // Work queues (JetStream): workers drop each malformed item, counted.
    const js = jetstream(t.nc);
    const dropsBefore = await workerDrops();
    const workCount = 2_000;
    let w = 0;
    const workCases = [
      ...fuzzPayloads(
        {
          v: 1,
          requestId: "r1",
          prompt: "a cat",
          seed: 1,
          model: served[0],
          replyTo: `hadis.result.${routerId}`,
          enqueuedAtMs: Date.now(),
          deadlineAtMs: Date.now() + 60_000,
          planEpoch: plan.epoch,
        },
        workCount,
        { seed: 31, hugeBytes: 64 * 1024 },
      ),
    ];
    await pooled(workCases, 50, async (c) => void (await js.publish(`hadis.work.${served[w++ % served.length]}`, c.data)));
    total += workCount;
    const dropDeadline = Date.now() + 30_000;
    let drops = await workerDrops();
    while (drops.malformed - dropsBefore.malformed < workCount && Date.now() < dropDeadline) {
      await new Promise((r) => setTimeout(r, 200));
      drops = await workerDrops();
    }
    figures.work = {
      sent: workCount,
      models: served,
      droppedMalformed: drops.malformed - dropsBefore.malformed,
      droppedOther: drops.expired + drops.wrongModel - dropsBefore.expired - dropsBefore.wrongModel,
    };
    expect(drops.malformed - dropsBefore.malformed).toBe(workCount);

    // Results to the router: counted as malformed.
    const resultTemplate = {
      v: 1,
      ok: true,
      requestId: "no-such-request",
      model: plan.pair.light,
      workerId: "w",
      image: new Uint8Array([1]),
      width: 1,
      height: 1,
      batchSize: 1,
      queueWaitMs: 0,
      execMs: 1,
    };
    const malformedBefore = (await serviceStats(t.nc, ServiceNames.router)).endpoints[0].data.malformedResults as number;
    const resultCount = 1_000;
    for (const c of fuzzPayloads(resultTemplate, resultCount, { seed: 41, hugeBytes: 64 * 1024 }))
      t.nc.publish(`hadis.result.${routerId}`, c.data);
    await t.nc.flush();
    total += resultCount;
    let malformedAfter = malformedBefore;
    const resultDeadline = Date.now() + 10_000;
    while (malformedAfter - malformedBefore < resultCount && Date.now() < resultDeadline) {
      await new Promise((r) => setTimeout(r, 100));
      malformedAfter = (await serviceStats(t.nc, ServiceNames.router)).endpoints[0].data.malformedResults as number;
    }
    figures.results = { sent: resultCount, countedMalformed: malformedAfter - malformedBefore };
    expect(malformedAfter - malformedBefore).toBe(resultCount);

    // Heartbeats and router stats: the resource manager counts every one it refuses (all that do
    // not decode as what their subject says they are) and acts on none of them.
    const [beats0, stats0] = [await rejected("heartbeat"), await rejected("router_stats")];
    const beat = {
      v: 1,
      workerId: "fuzz-00",
      backend: "profile",
      model: plan.pair.light,
      state: "serving",
      batchSize: 1,
      inFlight: 0,
      servedTotal: 0,
      swapsTotal: 0,
      planEpoch: plan.epoch,
      sentAtMs: Date.now(),
    };
    const beatCases = [...fuzzPayloads(beat, 500, { seed: 51 })];
    for (const c of beatCases) t.nc.publish("hadis.heartbeat.worker.fuzz-00", c.data);
    const stats = { v: 1, routerId: "fuzz", arrivals: 1_000_000, intervalMs: 1_000, inFlight: 0, sentAtMs: Date.now() };
    const statsCases = [...fuzzPayloads(stats, 500, { seed: 52 })];
    for (const c of statsCases) t.nc.publish("hadis.stats.router.fuzz", c.data);
    await t.nc.flush();
    total += 1_000;
    const refusedBeats = beatCases.filter((c) => !decodes(WorkerHeartbeatSchema, c.data, (m) => m.workerId === "fuzz-00")).length;
    const refusedStats = statsCases.filter((c) => !decodes(RouterStatsSchema, c.data, (m) => m.routerId === "fuzz")).length;
    const countedBy = Date.now() + 10_000;
    while (
      ((await rejected("heartbeat")) - beats0 < refusedBeats || (await rejected("router_stats")) - stats0 < refusedStats) &&
      Date.now() < countedBy
    )
      await new Promise((r) => setTimeout(r, 100));
    figures.controlMessages = {
      heartbeats: { sent: beatCases.length, refused: refusedBeats },
      routerStats: { sent: statsCases.length, refused: refusedStats },
    };
    expect(refusedBeats).toBeGreaterThan(400);
    expect((await rejected("heartbeat")) - beats0).toBe(refusedBeats);
    expect((await rejected("router_stats")) - stats0).toBe(refusedStats);

    // The plan key: every service keeps the plan it has (a fuzzed plan carries a far newer epoch,
    // so one that slipped through would be adopted and seen).
    const kv = await new Kvm(t.nc).open("hadis-plan");
    const planTemplate = { ...plan, epoch: plan.epoch + 1_000 } as Record<string, unknown>;
    for (const optional of ["routerMode", "expectedFid", "degraded", "demandQps", "capacityQps", "admission"])
      delete planTemplate[optional];
    const planCount = 100;
    for (const c of fuzzPayloads(planTemplate, planCount, { seed: 61, hugeBytes: 32 * 1024 })) await kv.put("current", c.data);
    total += planCount;
    await new Promise((r) => setTimeout(r, 500));
    // No fuzzed plan was taken (they carry epochs from plan.epoch + 1,000). The manager may have
    // re-planned meanwhile (a worker's heartbeat late under this load, then back): every service
    // holds its plan.
    // (A plan the manager has just written reaches the others a moment later: wait for them to agree.)
    const agreed = () => {
      const epoch = t.system.manager!.plans.current!.epoch;
      return t.system.routers[0].plans.current!.epoch === epoch && t.system.workers!.agents.every((a) => a.status("x").planEpoch === epoch);
    };
    await waitFor(agreed, 10_000, "every service holding the manager's plan");
    const kept = t.system.manager!.plans.current!;
    expect(kept.epoch).toBeLessThan(plan.epoch + 1_000);
    figures.planEpochs = { before: plan.epoch, after: kept.epoch };
    await kv.put("current", encode(kept));

    // Good requests throughout were served; every service still answers.
    const good = await stopGood();
    figures.good = good;
    expect(good.failed).toEqual([]);
    expect(good.sent).toBeGreaterThan(10);
    expect(await pingServices(t.nc)).toEqual(Object.values(ServiceNames).sort());
    figures.total = total;
    figures.seconds = (Date.now() - started) / 1000;
    expect(total).toBeGreaterThanOrEqual(10_000);
  }, 120_000);
});
