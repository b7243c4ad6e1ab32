/** A stopped resource manager ticks no more: a heartbeat during its last tick used to schedule one more, which could write a plan. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem({ workers: 2 });
});
afterAll(async () => {
  await t?.stop();
});

describe("the resource manager after stop", () => {
  it("starts no tick, so writes no plan", async () => {
    const manager = t.system.manager!;
    expect(await manager.tick()).not.toBeNull(); // running: a tick runs
    await manager.stop();
    expect(await manager.tick()).toBeNull();
  });
});
