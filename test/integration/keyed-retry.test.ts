/**
 * Retrying with an idempotency key after the first attempt ended without an image: the retry
 * must generate (JetStream would otherwise drop its item as a duplicate of the dead one for two
 * minutes), and the failure must not take the router down.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServices, startTestSystem, type TestSystem } from "../helpers/system.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { HadisError } from "../../contracts/errors.ts";
import { claimKey, fingerprintOf, keyedRequestId, resultKey } from "../../actors/request/idempotent.ts";
import { claimKeyFor } from "../../services/router/idempotency.ts";
import { storedResult } from "../../services/router/keyed-work.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import { decode, encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, WorkItemSchema, type WorkItem } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";
import { DEFAULT_WORK_QUEUE, WorkQueue } from "../../services/nats/work-queue.ts";
import { openResultsBucket } from "../../services/nats/kv-buckets.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { waitFor } from "../helpers/processes.ts";

let t: TestSystem;
let more: RunningSystem | undefined;
let third: RunningSystem | undefined;
let fresh: RunningSystem | undefined;
let fourth: RunningSystem | undefined;
let fifth: RunningSystem | undefined;
let loading: RunningSystem | undefined;
beforeAll(async () => {
  t = await startTestSystem({ workers: 2 });
});
afterAll(async () => {
  await fresh?.stop(2_000);
  await fourth?.stop(2_000);
  await fifth?.stop(2_000);
  await loading?.stop(2_000);
  await third?.stop(2_000);
  await more?.stop(2_000);
  await t?.stop();
});

/**
 * An earlier attempt of a keyed light-routed request, as another router queued it: its item for
 * the light model, due `dueInMs` from now (negative: past), with no worker pulling.
 */
async function earlierAttempt(label: string, seed: number, dueInMs: number) {
  const key = `${label}-${Date.now()}`;
  const prompt = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold).light;
  const requestId = keyedRequestId(key, fingerprintOf(prompt, seed));
  const model = t.system.routers[0].plans.current!.pair.light;
  const queue = await WorkQueue.open(t.nc, subjects(), { ...DEFAULT_WORK_QUEUE, storage: "memory" });
  const now = Date.now();
  const item: WorkItem = {
    v: PROTOCOL_VERSION,
    requestId,
    stage: "light",
    prompt,
    seed,
    model,
    replyTo: "hadis.result.other-router",
    enqueuedAtMs: dueInMs < 0 ? now + dueInMs - 4_000 : now,
    deadlineAtMs: now + dueInMs,
    planEpoch: 1,
  };
  const { seq } = await queue.publish(model, encode(item), `${requestId}/light/${model}`);
  return { key, prompt, requestId, model, queue, seq };
}

/**
 * Two workers on `t`'s server at a time scale whose loads take seconds (sd3.5-large-turbo: 2.7 s),
 * once a plan lists them. Joined before the workers serving now leave, they keep a plan with
 * workers in force (one with none answers every waiting request no_capacity at once, and under
 * load the manager makes it before workers started afterwards are heard) while none of them
 * holds the light model yet.
 */
async function loadingWorkers(prefix: string): Promise<RunningSystem> {
  const system = await startSystem({
    natsUrl: t.server.url,
    services: ["worker"],
    workers: 2,
    workerIdPrefix: prefix,
    timeScale: 0.2,
    policy: "static",
    scorer: "reference",
    workQueue: { storage: "memory", ackWaitMs: 2_000 },
    log: createLogger("test", "error"),
  });
  await waitFor(async () => planned().some((id) => id.startsWith(prefix)), 10_000, `a plan with ${prefix}`);
  return system;
}

/** The workers the router's plan in force assigns. */
const planned = () => Object.keys(t.system.routers[0].plans.current?.assignment ?? {});

/** Stops the workers of `system` and waits for a plan without them. */
async function leave(system: RunningSystem, prefix: string): Promise<void> {
  await Promise.all(system.workers!.agents.map((a) => a.stop()));
  await waitFor(async () => !planned().some((id) => id.startsWith(prefix)), 10_000, `a plan without ${prefix}`);
}

/** Whether any worker of `system` holds the light model (loaded). */
const holdsLight = (system: RunningSystem) => system.workers!.agents.some((a) => a.status("x").model === DEFAULT_STATIC.light);

describe("a keyed retry after an attempt that ended without an image", () => {
  it("generates anew once the first attempt's item is gone, and the one after it is deduplicated", async () => {
    // No worker pulls: the first attempt's item waits in the queue until its deadline removes it.
    await Promise.all(t.system.workers!.agents.map((a) => a.stop()));
    const key = `retry-${Date.now()}`;
    const firstAttempt = t.client
      .generate({ prompt: "a lighthouse at dusk", idempotencyKey: key, deadlineMs: 300 })
      .catch((e: unknown) => e);
    // A retry sent while the first attempt still runs, with time to spare: when the first fails,
    // the retry tries again rather than taking the first one's error.
    await new Promise((r) => setTimeout(r, 100));
    const retrying = t.client.generate({ prompt: "a lighthouse at dusk", idempotencyKey: key, deadlineMs: 10_000 });
    // A second retry waiting too: when the first attempt fails, one of them runs and the other waits on it.
    const alsoRetrying = t.client.generate({ prompt: "a lighthouse at dusk", idempotencyKey: key, deadlineMs: 10_000 });
    const first = await firstAttempt;
    expect(first).toBeInstanceOf(HadisError);
    expect((first as HadisError).code).toBe("deadline_exceeded");
    // Workers again (the manager assigns them when their heartbeats arrive).
    more = await startTestServices(t.server.url, { services: ["worker"], workers: 2, workerIdPrefix: "w-more" });
    expect(more.workers!.agents.filter((a) => a.status("x").state === "serving")).toHaveLength(2);
    const [retry, other] = await Promise.all([retrying, alsoRetrying]);
    expect(retry.image.byteLength).toBeGreaterThan(0);
    expect([retry.deduplicated, other.deduplicated].filter(Boolean)).toHaveLength(1);
    expect(Buffer.from(other.image).equals(Buffer.from(retry.image))).toBe(true);
    // One generation for the two of them (the prompt is light-routed: one image).
    expect(more.workers!.agents.reduce((n, a) => n + a.status("x").servedTotal, 0)).toBe(1);
    // The one after that finds the retry's image: served from the router's cache, not generated again.
    const again = await t.client.generate({ prompt: "a lighthouse at dusk", idempotencyKey: key, deadlineMs: 10_000 });
    expect(again.deduplicated).toBe(true);
    expect(again.requestId).toBe(retry.requestId);
    // The same key for another prompt (or seed) is refused, not answered with this prompt's image,
    // and, refused input, counts in no SLO figure.
    const sloRequests = async () => Number(/^hadis_slo_requests_total (\S+)$/m.exec(await metricsText())?.[1] ?? 0);
    const counted = await sloRequests();
    for (const other of [{ prompt: "a lighthouse at noon" }, { prompt: "a lighthouse at dusk", seed: 7 }]) {
      const reused = await t.client.generate({ ...other, idempotencyKey: key, deadlineMs: 10_000 }).catch((e: unknown) => e);
      expect(reused).toBeInstanceOf(HadisError);
      expect(reused).toMatchObject({ code: "invalid_request", details: { field: "idempotencyKey" } });
    }
    expect(await sloRequests()).toBe(counted);
    // (Its surrounding spaces are not part of a prompt: the same request.)
    expect((await t.client.generate({ prompt: "  a lighthouse at dusk ", idempotencyKey: key, deadlineMs: 10_000 })).deduplicated).toBe(
      true,
    );
  }, 40_000);

  it("does not wait on an earlier attempt's item that is still queued but past its deadline (its router died)", async () => {
    // The earlier attempt: its router died, so nothing removed its item; no worker has pulled it.
    // The retry, sent while no worker holds the light model; they have it a moment later (`loadingWorkers`).
    third = await loadingWorkers("w-third");
    await leave(more!, "w-more");
    expect(holdsLight(third)).toBe(false);
    const { key, prompt } = await earlierAttempt("orphan", 7, -1_000);
    const retry = t.client.generate({ prompt, idempotencyKey: key, seed: 7, deadlineMs: 10_000 });
    const reply = await retry;
    expect(reply.image.byteLength).toBeGreaterThan(0);
    expect(reply.route).toBe("light"); // the stage whose item was stale
  }, 40_000);

  it("queues its own item once the item it rode on (another router's, due sooner) passes its deadline without an image", async () => {
    // The earlier attempt went through another router with a shorter deadline; no worker pulls
    // until that deadline has passed, so a worker drops that item unrun.
    // The workers that serve the retry join before the previous test's leave (`loadingWorkers`).
    fourth = await loadingWorkers("w-fourth");
    await leave(third!, "w-third");
    expect(holdsLight(fourth)).toBe(false);
    const { key, prompt } = await earlierAttempt("rider", 9, 400);
    // (Before, the retry waited out its own deadline: `deadline_exceeded`.)
    const started = performance.now();
    const retry = t.client.generate({ prompt, idempotencyKey: key, seed: 9, deadlineMs: 8_000 });
    const reply = await retry;
    expect(reply.image.byteLength).toBeGreaterThan(0);
    expect(reply.route).toBe("light");
    expect(performance.now() - started).toBeLessThan(6_000); // not near its own deadline
  }, 40_000);

  it("removes the item it queued after riding when the item it rode on answers after all (one generation, not two)", async () => {
    // No worker pulls the light model, and a plan with workers stays in force (`loadingWorkers`).
    loading = await loadingWorkers("w-loading");
    await leave(fourth!, "w-fourth");
    expect(holdsLight(loading)).toBe(false);
    const { key, prompt, requestId, model, queue, seq } = await earlierAttempt("rider-late", 11, 300);
    const retry = t.client.generate({ prompt, idempotencyKey: key, seed: 11, deadlineMs: 8_000 });
    // Past the earlier item's deadline the retry queues its own (the next item in the stream).
    await waitFor(
      async () => {
        const next = await queue.itemAt(seq + 1);
        return !!next && decode(WorkItemSchema, next, "work item").requestId === requestId;
      },
      5_000,
      "the retry's own item queued",
    );
    // A worker that took the earlier item before its deadline finishes it now: its image reaches the bucket.
    const image = new Uint8Array([7, 7, 7]);
    const late = {
      v: PROTOCOL_VERSION,
      ok: true,
      requestId,
      stage: "light",
      model,
      workerId: "w-earlier",
      image,
      width: 8,
      height: 8,
      batchSize: 1,
      queueWaitMs: 1,
      execMs: 1,
    };
    await (await openResultsBucket(t.nc, subjects())).put(resultKey(requestId, "light"), encode(late));
    const reply = await retry;
    expect(Buffer.from(reply.image).equals(Buffer.from(image))).toBe(true);
    // Workers again: the retry's own item is no longer queued (the earlier one is past its deadline, dropped unrun).
    fifth = await startTestServices(t.server.url, { services: ["worker"], workers: 2, workerIdPrefix: "w-fifth" });
    await new Promise((r) => setTimeout(r, 1_500));
    expect([fifth, loading].flatMap((w) => w.workers!.agents).reduce((n, a) => n + a.status("x").servedTotal, 0)).toBe(0);
  }, 40_000);

  it("answers a stage stored in the results bucket without generating it again, and any router refuses the key for another prompt", async () => {
    const key = `stored-${Date.now()}`;
    const prompt = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold).light;
    const requestId = keyedRequestId(key, fingerprintOf(prompt, undefined));
    const model = t.system.routers[0].plans.current!.pair.light;
    // The light image of an earlier attempt, stored by a worker (past JetStream's 2-minute duplicate window, say).
    const results = await openResultsBucket(t.nc, subjects());
    const image = new Uint8Array([137, 80, 78, 71, 9, 9, 9]);
    await results.put(
      resultKey(requestId, "light"),
      encode({
        v: PROTOCOL_VERSION,
        ok: true,
        requestId,
        stage: "light",
        model,
        workerId: "w-gone",
        image,
        width: 8,
        height: 8,
        batchSize: 1,
        queueWaitMs: 0,
        execMs: 5,
      }),
    );
    const served = () => third!.workers!.agents.reduce((n, a) => n + a.status("x").servedTotal, 0);
    const before = served();
    const reply = await t.client.generate({ prompt, idempotencyKey: key, deadlineMs: 10_000 });
    expect([...reply.image]).toEqual([...image]);
    expect(reply.route).toBe("light");
    expect(served()).toBe(before);
    // What the key was used for is in the bucket too: a router that never saw the key refuses it for another prompt.
    expect(new TextDecoder().decode((await results.get(claimKey(key)))!.value)).toBe(fingerprintOf(prompt, undefined));
    await expect(claimKeyFor(results, key, fingerprintOf("another prompt", undefined))).rejects.toMatchObject({
      code: "invalid_request",
      details: { field: "idempotencyKey" },
    });
    await expect(claimKeyFor(results, key, fingerprintOf(prompt, undefined))).resolves.toBeUndefined();
  }, 40_000);

  it("a keyed request this router queued itself opens no watch on the results bucket (each is a consumer the server keeps for minutes)", async () => {
    const { jetstreamManager } = await import("@nats-io/jetstream");
    const jsm = await jetstreamManager(t.nc);
    const stream = `KV_${subjects().names.resultsBucket}`;
    const consumers = async () => (await jsm.consumers.list(stream).next()).length;
    const before = await consumers();
    const prompt = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold).light;
    const reply = await t.client.generate({ prompt, idempotencyKey: `own-${Date.now()}`, deadlineMs: 10_000 });
    expect(reply.image.byteLength).toBeGreaterThan(0);
    expect(await consumers()).toBe(before);
  }, 20_000);

  it("a key reused for another request once its claim is gone (10 minutes on) is generated anew, not answered with the earlier request's stored image", async () => {
    const key = `reused-${Date.now()}`;
    const prompt = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold).light;
    const first = await t.client.generate({ prompt, idempotencyKey: key, deadlineMs: 10_000 });
    // Ten minutes on: the claim has expired (deleted here), and so has every router's memory of
    // the key (here a fresh router), while the first request's light image may still be stored.
    const results = await openResultsBucket(t.nc, subjects());
    expect(await storedResult(results, resultKey(first.requestId, "light"))).not.toBeNull();
    await results.delete(claimKey(key));
    await t.system.routers[0].stop(2_000);
    fresh = await startTestServices(t.server.url, { services: ["router"] });
    await t.client.waitUntilServing(10_000);
    // (Every worker this file started: the test may run alone.)
    const served = () =>
      [t.system, more, third, fourth, fifth, loading]
        .flatMap((s) => s?.workers?.agents ?? [])
        .reduce((n, a) => n + a.status("x").servedTotal, 0);
    const before = served();
    const reused = await t.client.generate({ prompt, seed: 12_345, idempotencyKey: key, deadlineMs: 10_000 });
    expect(reused.requestId).not.toBe(first.requestId);
    expect(reused.seed).toBe(12_345);
    expect(served()).toBeGreaterThan(before); // generated, not read from the bucket
  }, 40_000);
});
