/** The router's check after a reconnect (`recoverLost`), against a scripted work queue: what it queues again, and what it leaves alone. */
import { describe, expect, it } from "vitest";
import { recoverLost, singleFlight } from "../../services/router/recover.ts";
import { PendingWork } from "../../services/router/pending.ts";
import { ServiceTelemetry } from "../../services/telemetry/tracing.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { waiting } from "../helpers/pending.ts";

/** A queue whose `itemAt` and `publish` run `during` before they answer (the request answered or moved meanwhile). */
function queue(held: Record<number, boolean>, during: { itemAt?: () => void; publish?: () => void } = {}) {
  const published: string[] = [];
  const removed: number[] = [];
  return {
    published,
    removed,
    itemAt: async (seq: number) => (during.itemAt?.(), held[seq] ? new Uint8Array([1]) : null),
    publish: async (_model: string, _data: Uint8Array, msgId: string) => (
      during.publish?.(),
      published.push(msgId),
      { seq: 200 + published.length, duplicate: false }
    ),
    remove: async (seq: number) => (removed.push(seq), true),
  };
}

const deps = (pending: PendingWork, q: ReturnType<typeof queue>) => ({
  queue: q,
  pending,
  telemetry: new ServiceTelemetry("hadis-router", null),
  log: createLogger("test", "silent"),
});

describe("recoverLost", () => {
  it("queues again an item gone from the stream, and leaves alone one still there", async () => {
    const pending = new PendingWork();
    const gone = waiting(pending, "gone", 7);
    const there = waiting(pending, "there", 8);
    const q = queue({ 8: true });
    expect(await recoverLost(deps(pending, q))).toBe(1);
    expect(q.published).toEqual(["gone/light/m/lost@7"]);
    expect(gone.seq).toBe(201);
    expect(there.seq).toBe(8);
  });

  it("leaves an entry moved while its item was looked up (no third copy, its new item still tracked)", async () => {
    const pending = new PendingWork();
    const entry = waiting(pending, "moved", 7);
    const q = queue({}, { itemAt: () => void (entry.seq = 50) }); // the mover re-queued it at 50 meanwhile
    expect(await recoverLost(deps(pending, q))).toBe(0);
    expect(q.published).toEqual([]);
    expect(entry.seq).toBe(50);
  });

  it("removes the copy it queued when the request was answered while that publish was in flight", async () => {
    const pending = new PendingWork();
    const entry = waiting(pending, "answered", 7);
    const q = queue({}, { publish: () => pending.drop(entry) }); // its result (or its deadline) came meanwhile
    expect(await recoverLost(deps(pending, q))).toBe(0);
    expect(q.published).toEqual(["answered/light/m/lost@7"]);
    expect(q.removed).toEqual([201]);
  });

  it("does not remove the copy the entry already waits on (another check queued it under the same id)", async () => {
    const pending = new PendingWork();
    const entry = waiting(pending, "twice", 7);
    const q = queue({}, { publish: () => void (entry.seq = 201) }); // the other check's publish landed first: same message
    await recoverLost(deps(pending, q));
    expect(q.removed).toEqual([]); // the item the entry waits on stays queued
  });

  it("a keyed item another router queued again first is ridden on: its result watched for in the bucket", async () => {
    const pending = new PendingWork();
    const requestId = "k-0123456789abcdef0123456789abcdef";
    const entry = waiting(pending, requestId, 7, false);
    entry.settled = new Promise(() => undefined);
    const q = queue({ 300: true });
    q.publish = async (_model: string, _data: Uint8Array, msgId: string) => (q.published.push(msgId), { seq: 300, duplicate: true });
    const watched: string[] = [];
    const results = {
      get: async () => null,
      watch: async ({ key }: { key: string }) => (watched.push(key), Object.assign((async function* () {})(), { stop: () => undefined })),
    };
    expect(await recoverLost({ ...deps(pending, q), results: results as never })).toBe(1);
    expect(entry.seq).toBe(300);
    expect(entry.own).toBe(false);
    // Before, nothing watched: the result of the copy it now waits on goes to the other router's inbox.
    expect(watched).toEqual([`${requestId}.light`]);
  });
});

describe("singleFlight", () => {
  it("runs one at a time, and once more after a run for calls that came during it", async () => {
    let runs = 0;
    let release: () => void = () => undefined;
    const go = singleFlight(() => (runs++, new Promise<void>((r) => (release = r))));
    go();
    go();
    go(); // during the first run: one more after it, not two
    expect(runs).toBe(1);
    release();
    await new Promise((r) => setTimeout(r, 0));
    expect(runs).toBe(2);
    release();
    await new Promise((r) => setTimeout(r, 0));
    expect(runs).toBe(2);
  });
});
