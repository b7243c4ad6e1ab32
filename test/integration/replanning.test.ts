/**
 * The control loop live: demand rises, the manager's MILP picks another configuration, the plan's
 * epoch advances, workers swap models, and every request is answered through the swap.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem({ policy: "hadis", workers: 8, timeScale: 0.01, tickMs: 250, demandHalfLifeMs: 400 });
});
afterAll(async () => {
  await t?.stop();
});

async function offer(qps: number, seconds: number) {
  const calls: Promise<unknown>[] = [];
  const end = Date.now() + seconds * 1000;
  let i = 0;
  while (Date.now() < end) {
    calls.push(t.client.generate({ prompt: `a photo of object ${i++}`, deadlineMs: 15_000 }));
    await new Promise((r) => setTimeout(r, 1000 / qps));
  }
  return Promise.allSettled(calls);
}

describe("re-planning under rising demand", () => {
  it("advances the epoch, swaps workers and answers every request", async () => {
    const quiet = await offer(3, 2);
    const before = t.system.manager!.plans.current!;
    const swapsBefore = t.system.workers!.agents.reduce((s, a) => s + a.status("x").swapsTotal, 0);
    const busy = await offer(120, 3);
    const after = t.system.manager!.plans.current!;
    const swapsAfter = t.system.workers!.agents.reduce((s, a) => s + a.status("x").swapsTotal, 0);

    expect(after.epoch).toBeGreaterThan(before.epoch);
    // The plan in force was made for the higher demand the manager measured.
    expect(after.demandQps!).toBeGreaterThan(before.demandQps ?? 0);
    expect(swapsAfter).toBeGreaterThan(swapsBefore);
    const all = [...quiet, ...busy];
    const failures = all.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
    expect(failures).toEqual([]);
  }, 60_000);
});
