/** Per-request state the router keeps must go when its request does: the idempotency cache and the plan waiters. */
import { describe, expect, it } from "vitest";
import { claimKeyFor, detached, IdempotencyCache } from "../../services/router/idempotency.ts";
import { fingerprintOf } from "../../actors/request/idempotent.ts";
import type { KV } from "../../services/nats/connection.ts";
import { openResultsBucket, RESULTS_MAX_BYTES } from "../../services/nats/kv-buckets.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import { PlanView } from "../../services/nats/plan-view.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";
import { createLogger } from "../../services/telemetry/log.ts";

describe("IdempotencyCache", () => {
  it("drops expired replies as new ones come, not only when their own key is asked again", () => {
    let now = 0;
    const cache = new IdempotencyCache<string>(1_000, 100, () => now);
    for (let i = 0; i < 50; i++) cache.set(`k${i}`, Promise.resolve("image"));
    expect(cache.size).toBe(50);
    now = 150; // all 50 expired
    cache.set("fresh", Promise.resolve("image"));
    expect(cache.size).toBe(1);
    expect(cache.get("k3")).toBeUndefined();
    expect(cache.get("fresh")).toBeDefined();
  });

  it("a key set again moves to the back and lives its full time; a failure is forgotten", async () => {
    let now = 0;
    const cache = new IdempotencyCache<string>(1_000, 100, () => now);
    cache.set("a", Promise.resolve("1"));
    now = 50;
    cache.set("b", Promise.resolve("2"));
    cache.set("a", Promise.resolve("3")); // again: expires at 150 now
    now = 120;
    cache.set("c", Promise.resolve("4"));
    expect(await cache.get("a")!.value).toBe("3");
    const failed = Promise.reject(new Error("deadline"));
    cache.set("d", failed);
    await failed.catch(() => undefined);
    expect(cache.get("d")).toBeUndefined();
  });

  it("keeps finished replies within its byte budget, oldest out first, never one still running; tells what each key was asked", async () => {
    const cache = new IdempotencyCache<string>(1_000, 60_000, () => 0, { maxBytes: 100, sizeOf: (v) => v.length });
    let finish!: (v: string) => void;
    cache.set("running", new Promise((r) => (finish = r)), "p0");
    for (let i = 1; i <= 5; i++) cache.set(`k${i}`, Promise.resolve("x".repeat(40)), `p${i}`);
    await new Promise((r) => setTimeout(r, 0));
    // 5 × 40 bytes against 100: the two newest stay, the reply still running too.
    expect(cache.heldBytes).toBe(80);
    expect(["running", "k1", "k2", "k3", "k4", "k5"].filter((k) => cache.get(k))).toEqual(["running", "k4", "k5"]);
    expect(cache.get("k5")!.fingerprint).toBe("p5");
    finish("y".repeat(30));
    await new Promise((r) => setTimeout(r, 0));
    // 110 bytes now: the oldest finished one goes, the first set (it finished last).
    expect(cache.heldBytes).toBe(80);
    expect(["running", "k4", "k5"].filter((k) => cache.get(k))).toEqual(["k4", "k5"]);
  });
});

describe("the results bucket", () => {
  const t = useNatsServer("test-results-bucket");

  it("is made with a byte limit, and refuses a result when full instead of filling the disk", async () => {
    const results = await openResultsBucket(t.nc, subjects("hbytes"));
    expect((await results.status()).streamInfo.config.max_bytes).toBe(RESULTS_MAX_BYTES);
    const small = await openResultsBucket(t.nc, subjects("hsmall"), 1, 4_096);
    await small.put("k-1.light", new Uint8Array(3_000));
    await expect(small.put("k-2.light", new Uint8Array(3_000))).rejects.toThrow(/maximum bytes|resource/i);
    expect((await small.get("k-1.light"))?.value.length).toBe(3_000); // what it holds stays
  });
});

describe("detached", () => {
  it("gives a remembered reply's image memory of its own, so it does not keep the message it came in", () => {
    const read = new Uint8Array(65_536); // a socket read holding many messages
    read.set([137, 80, 78, 71], 1_000);
    const reply = { requestId: "r", image: read.subarray(1_000, 1_079) };
    const kept = detached(reply);
    expect(kept.image.buffer.byteLength).toBe(79);
    expect([...kept.image.subarray(0, 4)]).toEqual([137, 80, 78, 71]);
    expect(kept.requestId).toBe("r");
    const own = { image: new Uint8Array(79) };
    expect(detached(own)).toBe(own); // nothing to copy
    // What the decoder really hands out: a Buffer view (whose `slice` shares its memory).
    const socketRead = Buffer.alloc(65_536);
    const fromWire = detached({ image: socketRead.subarray(1_000, 1_079) });
    expect(fromWire.image.buffer.byteLength).toBe(79);
  });
});

describe("claimKeyFor: the idempotency key check", () => {
  const t = useNatsServer("test-key-claim");

  it("says why a key went unchecked when the results bucket is gone or does not answer, and says nothing when it checked", async () => {
    const own = subjects("hclaim");
    const results = await openResultsBucket(t.nc, own);
    const reasons: string[] = [];
    await claimKeyFor(results, "k1", fingerprintOf("a red bicycle", undefined), (r) => reasons.push(r));
    await claimKeyFor(results, "k1", fingerprintOf("a red bicycle", undefined), (r) => reasons.push(r)); // the retry: claimed by the first
    expect(reasons).toEqual([]);
    // The bucket deleted under the router (an operator's mistake, a lost stream): the request goes on, unchecked, and says so.
    await (await jetstreamManager(t.nc)).streams.delete(`KV_${own.names.resultsBucket}`);
    await claimKeyFor(results, "k2", fingerprintOf("a blue bicycle", undefined), (r) => reasons.push(r));
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/stream not found|no responders|did not answer within 1000 ms/i);
    // A bucket that never answers costs the check its timeout, not the request's deadline.
    const silent = { create: () => new Promise(() => {}), get: () => new Promise(() => {}) } as unknown as KV;
    await claimKeyFor(silent, "k3", "f", (r) => reasons.push(r), 50);
    expect(reasons[1]).toBe("the results bucket did not answer within 50 ms");
  });
});

describe("PlanView.waitForPlan", () => {
  const t = useNatsServer("test-plan-view");

  it("a wait that times out leaves nothing behind while no plan comes", async () => {
    const { view } = await PlanView.open(t.nc, subjects(), createLogger("test", "error"));
    const waits = await Promise.all(Array.from({ length: 200 }, () => view.waitForPlan(5)));
    expect(waits.every((p) => p === null)).toBe(true);
    expect((view as unknown as { waiters: unknown[] }).waiters).toHaveLength(0);
    view.close();
  });

  it("waits for an epoch another service already follows, and gives what it holds when it does not come", async () => {
    const own = subjects("hview");
    const { view, kv } = await PlanView.open(t.nc, own, createLogger("test", "error"));
    const plan = (epoch: number) =>
      encode({
        v: PROTOCOL_VERSION,
        epoch,
        policy: "t",
        issuedAtMs: 0,
        sloMs: 1000,
        timeScale: 1,
        pair: { light: "a", heavy: "b" },
        routerThreshold: 0,
        discThreshold: 0.1 * epoch,
        heavyShare: 0,
        models: { a: { workers: 1, batchSize: 1 } },
        assignment: { w: "a" },
        reason: "",
      });
    await kv.put(own.names.planKey, plan(1));
    expect((await view.waitForEpoch(1, 2_000))?.epoch).toBe(1);
    const started = Date.now();
    setTimeout(() => void kv.put(own.names.planKey, plan(2)), 100);
    expect((await view.waitForEpoch(2, 2_000))?.epoch).toBe(2); // came in time
    expect(Date.now() - started).toBeLessThan(1_500);
    expect((await view.waitForEpoch(5, 100))?.epoch).toBe(2); // never came: what it holds
    view.close();
  });

  it("a notice of an epoch its watch has not delivered re-opens the watch (one lost with a server would wait out its heartbeats)", async () => {
    const own = subjects("hnotice");
    const { view, kv } = await PlanView.open(t.nc, own, createLogger("test", "silent"));
    const plan = (epoch: number) =>
      encode({
        v: PROTOCOL_VERSION,
        epoch,
        policy: "t",
        issuedAtMs: 0,
        sloMs: 1000,
        timeScale: 1,
        pair: { light: "a", heavy: "b" },
        routerThreshold: 0,
        discThreshold: 0,
        heavyShare: 0,
        models: { a: { workers: 1, batchSize: 1 } },
        assignment: { w: "a" },
        reason: "",
      });
    await kv.put(own.names.planKey, plan(1));
    expect((await view.waitForEpoch(1, 2_000))?.epoch).toBe(1);
    // The watch dies unseen (its consumer gone with a server); epoch 2 is written and announced.
    (view as unknown as { watch: AbortController }).watch.abort();
    await kv.put(own.names.planKey, plan(2));
    await new Promise((r) => setTimeout(r, 200));
    expect(view.current?.epoch).toBe(1); // the dead watch did not deliver it
    t.nc.publish(own.planBroadcast, encode({ v: PROTOCOL_VERSION, epoch: 2 }));
    expect((await view.waitForEpoch(2, 3_000))?.epoch).toBe(2);
    expect(view.resyncs).toBe(1);
    // A notice the watch keeps up with re-opens nothing.
    await kv.put(own.names.planKey, plan(3));
    t.nc.publish(own.planBroadcast, encode({ v: PROTOCOL_VERSION, epoch: 3 }));
    expect((await view.waitForEpoch(3, 2_000))?.epoch).toBe(3);
    await new Promise((r) => setTimeout(r, 1_200));
    expect(view.resyncs).toBe(1);
    // A notice (4) arms the check, the watch delivers 4 and then dies, and 5 is announced within the same second: 5 is not lost.
    t.nc.publish(own.planBroadcast, encode({ v: PROTOCOL_VERSION, epoch: 4 }));
    await t.nc.flush();
    await kv.put(own.names.planKey, plan(4));
    expect((await view.waitForEpoch(4, 2_000))?.epoch).toBe(4);
    (view as unknown as { watch: AbortController }).watch.abort();
    await kv.put(own.names.planKey, plan(5));
    t.nc.publish(own.planBroadcast, encode({ v: PROTOCOL_VERSION, epoch: 5 }));
    expect((await view.waitForEpoch(5, 4_000))?.epoch).toBe(5);
    expect(view.resyncs).toBe(2);
    view.close();
  });
});
