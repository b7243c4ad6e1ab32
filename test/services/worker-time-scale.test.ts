/**
 * Workers started on their own (`hadis serve worker`) with another time scale than the system's
 * plan: every batch would take another time than the plan counts on, with no other sign. They
 * warn, once a scale; workers at the plan's scale do not.
 */
import { afterAll, describe, expect, it } from "vitest";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import type { Logger } from "../../services/telemetry/log.ts";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { waitFor } from "../helpers/processes.ts";

const running: { stop(): Promise<unknown> }[] = [];
afterAll(async () => {
  for (const r of running.reverse()) await r.stop();
});

/** Workers on `t`'s server at `timeScale`, and the warnings they log. */
async function workersAt(
  t: TestSystem,
  timeScale: number,
): Promise<{ system: RunningSystem; warnings: { event: string; fields: Record<string, unknown> }[] }> {
  const warnings: { event: string; fields: Record<string, unknown> }[] = [];
  const log: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (event, fields = {}) => void warnings.push({ event, fields }),
    error: () => undefined,
  };
  const system: RunningSystem = await startSystem({
    natsUrl: t.server.url,
    services: ["worker"],
    workers: 1,
    timeScale,
    workQueue: { storage: "memory" },
    log,
  });
  running.push({ stop: () => system.stop(2_000) });
  return { system, warnings };
}

describe("workers whose time scale is not the plan's", () => {
  it("warn once, naming the plan's scale; at the plan's scale they do not", async () => {
    const t = await startTestSystem({ workers: 1, timeScale: 0.02 });
    running.push(t);
    await waitFor(() => t.system.workers!.agents[0].status("profile").model !== null, 20_000, "the plan's first worker loaded");
    const { warnings: slow } = await workersAt(t, 1);
    const { system: sameSystem, warnings: same } = await workersAt(t, 0.02);
    await waitFor(() => slow.some((w) => w.event === "worker.time_scale_differs"), 10_000, "the warning");
    // The worker at the plan's scale has the plan too (its silence is not a plan not heard yet).
    await waitFor(() => sameSystem.workers!.agents[0].status("profile").planEpoch >= 1, 10_000, "the same-scale worker's plan");
    await new Promise((r) => setTimeout(r, 500));
    expect(slow.filter((w) => w.event === "worker.time_scale_differs")).toEqual([
      { event: "worker.time_scale_differs", fields: { plan: 0.02, workers: 1, hint: "start the workers with --time-scale 0.02" } },
    ]);
    expect(same.map((w) => w.event)).not.toContain("worker.time_scale_differs");
  }, 60_000);
});
