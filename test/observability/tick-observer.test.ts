/**
 * The resource manager's tick observer reports the plan in force, whether the tick adopted a new
 * one or kept the stored one: a manager restarted on a stable system adopts nothing, and its plan
 * gauges must not stay empty.
 */
import { describe, expect, it } from "vitest";
import type { TickOutcome } from "../../actors/control/reconcile.ts";
import type { Plan } from "../../contracts/messages.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import { configureTelemetry } from "../../services/telemetry/tracing.ts";
import { tickObserver } from "../../services/resource-manager/observe.ts";

const kept: Plan = {
  v: 1,
  epoch: 41,
  policy: "hadis",
  issuedAtMs: 0,
  sloMs: 6_000,
  timeScale: 0.1,
  pair: { light: "sd35-medium", heavy: "sd35-large" },
  routerThreshold: 0.2,
  discThreshold: 0.3,
  heavyShare: 0.25,
  expectedFid: 19.5,
  models: { "sd35-medium": { workers: 3, batchSize: 4 }, "sd35-large": { workers: 1, batchSize: 1 } },
  assignment: { "gpu-0": "sd35-medium", "gpu-1": "sd35-medium", "gpu-2": "sd35-medium", "gpu-3": "sd35-large" },
  reason: "test",
  degraded: 0,
};

/** A tick that changed nothing: no new plan, the stored one in its snapshot. */
const unchanged = {
  plan: null,
  held: "unchanged",
  swapped: [],
  snapshot: { demandQps: 2.5, queueDepth: { "sd35-medium": 0, "sd35-large": 0 }, workers: [], current: kept },
  decision: { solveMs: 3, pair: kept.pair },
  excluded: { models: [], workers: [] },
} as unknown as TickOutcome;

/** The value of a series in the metrics text (the first whose labels contain `labels`). */
function value(text: string, name: string, labels = ""): number | undefined {
  const line = text.split("\n").find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && l.includes(labels));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("tick observer", () => {
  it("reports the kept plan of a tick that adopted none", async () => {
    configureTelemetry({ enabled: false });
    const before = await metricsText();
    expect(value(before, "hadis_plan_epoch")).toBe(0);
    tickObserver(null as never)(unchanged, undefined, 4);
    const text = await metricsText();
    expect(value(text, "hadis_plan_epoch")).toBe(41);
    expect(value(text, "hadis_plan_workers", 'model="sd35-medium"')).toBe(3);
    expect(value(text, "hadis_plan_batch_size", 'model="sd35-medium"')).toBe(4);
    expect(value(text, "hadis_plan_info", 'light="sd35-medium"')).toBe(1);
    expect(value(text, "hadis_demand_requests_per_second")).toBe(2.5);
  });

  it("reports a new plan over the kept one", async () => {
    tickObserver(null as never)(
      { ...unchanged, plan: { ...kept, epoch: 42, models: { "sd35-medium": { workers: 2, batchSize: 8 } } } } as TickOutcome,
      undefined,
      4,
    );
    const text = await metricsText();
    expect(value(text, "hadis_plan_epoch")).toBe(42);
    expect(value(text, "hadis_plan_batch_size", 'model="sd35-medium"')).toBe(8);
  });
});
