/**
 * A stopped resource manager ticks no more and writes no plan: a heartbeat from a new worker
 * during its last tick schedules a tick 200 ms later, which used to run after the stop.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { subjects } from "../../contracts/subjects.ts";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { openPlanBucket } from "../../services/nats/kv-buckets.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem({ workers: 2 });
});
afterAll(async () => {
  await t?.stop();
});

describe("the resource manager after stop", () => {
  it("a tick scheduled by a heartbeat during its last tick does not run: no plan is written after the stop", async () => {
    const manager = t.system.manager!;
    const s = subjects();
    const bucket = await openPlanBucket(t.nc, s);
    const last = manager.tick(); // in flight when the heartbeat and the stop come
    // A worker the plan does not know: the manager schedules a tick 200 ms from now.
    t.nc.publish(
      s.workerHeartbeat("late-0"),
      encode({
        v: PROTOCOL_VERSION,
        workerId: "late-0",
        backend: "profile",
        model: null,
        state: "idle",
        batchSize: 1,
        inFlight: 0,
        servedTotal: 0,
        swapsTotal: 0,
        planEpoch: 0,
        sentAtMs: Date.now(),
      }),
    );
    await t.nc.flush();
    await manager.stop();
    expect(await last).not.toBeNull(); // the last tick ran (started before the stop)
    const revision = (await bucket.get("current"))!.revision;
    await new Promise((r) => setTimeout(r, 500));
    expect((await bucket.get("current"))!.revision).toBe(revision);
    expect(await manager.tick()).toBeNull();
  });
});
