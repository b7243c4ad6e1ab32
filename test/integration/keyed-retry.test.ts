/**
 * Retrying with an idempotency key after the first attempt ended without an image: the retry
 * must generate (JetStream would otherwise drop its item as a duplicate of the dead one for two
 * minutes), and the failure must not take the router down.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServices, startTestSystem, type TestSystem } from "../helpers/system.ts";
import type { RunningSystem } from "../../services/system.ts";
import { HadisError } from "../../contracts/errors.ts";

let t: TestSystem;
let more: RunningSystem | undefined;
beforeAll(async () => {
  t = await startTestSystem({ workers: 2 });
});
afterAll(async () => {
  await more?.stop(2_000);
  await t?.stop();
});

describe("a keyed retry after an attempt that ended without an image", () => {
  it("generates anew once the first attempt's item is gone, and the one after it is deduplicated", async () => {
    // No worker pulls: the first attempt's item waits in the queue until its deadline removes it.
    await Promise.all(t.system.workers!.agents.map((a) => a.stop()));
    const key = `retry-${Date.now()}`;
    const first = await t.client.generate({ prompt: "a lighthouse at dusk", idempotencyKey: key, deadlineMs: 300 }).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(HadisError);
    expect((first as HadisError).code).toBe("deadline_exceeded");
    // Workers again (the manager assigns them when their heartbeats arrive).
    more = await startTestServices(t.server.url, { services: ["worker"], workers: 2, workerIdPrefix: "w-more" });
    expect(more.workers!.agents.filter((a) => a.status("x").state === "serving")).toHaveLength(2);
    const retry = await t.client.generate({ prompt: "a lighthouse at dusk", idempotencyKey: key, deadlineMs: 10_000 });
    expect(retry.image.byteLength).toBeGreaterThan(0);
    // The one after that finds the retry's image: served from the router's cache, not generated again.
    const again = await t.client.generate({ prompt: "a lighthouse at dusk", idempotencyKey: key, deadlineMs: 10_000 });
    expect(again.deduplicated).toBe(true);
    expect(again.requestId).toBe(retry.requestId);
  }, 40_000);
});
