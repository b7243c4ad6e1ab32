/** A request whose deadline passes mid-generation: the caller gets deadline_exceeded, and the router's log says where the time went. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import type { HadisError } from "../../contracts/errors.ts";
import type { Logger } from "../../services/telemetry/log.ts";

const events: { event: string; fields: Record<string, unknown> }[] = [];
const keep = (event: string, fields: Record<string, unknown> = {}) => void events.push({ event, fields });
const log: Logger = { debug: () => undefined, info: keep, warn: keep, error: keep };
let t: TestSystem;

beforeAll(async () => {
  // Real profiled latencies at a tenth: the heavy model takes over a second an image.
  t = await startTestSystem({ timeScale: 0.1, log });
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

describe("an expired request", () => {
  it("is answered deadline_exceeded and logged with the stages it finished and the plan it ran under", async () => {
    const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
    const err = await t.client.generate({ prompt: routes.heavy, deadlineMs: 300 }).catch((e: unknown) => e);
    expect((err as HadisError).code).toBe("deadline_exceeded");
    const expired = events.find((e) => e.event === "router.expired");
    expect(expired?.fields).toMatchObject({
      deadlineMs: 300,
      stage: "heavy",
      hard: true,
      pair: `${DEFAULT_STATIC.light}→${DEFAULT_STATIC.heavy}`,
      planEpoch: t.system.manager!.plans.current!.epoch,
      timings: { lightMs: 0, judgeMs: 0, heavyMs: 0 },
    });
    const timings = expired!.fields.timings as { routeMs: number; totalMs: number };
    expect(timings.routeMs).toBeGreaterThanOrEqual(0);
    expect(timings.routeMs).toBeLessThanOrEqual(timings.totalMs);
    expect(timings.totalMs).toBeGreaterThanOrEqual(299); // (timers may fire a millisecond early by Date.now())
    expect(timings.totalMs).toBeLessThan(1_000);
  }, 20_000);
});
