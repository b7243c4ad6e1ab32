/**
 * The gauges that describe the present: a model no longer queued, or a plan without an FID
 * estimate, leaves no stale value behind. (Apart from metrics.test.ts, whose running manager
 * records its own queue depths every tick.)
 */
import { describe, expect, it } from "vitest";
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import { metricsText, recordPlan, recordQueueDepths } from "../../services/telemetry/metrics.ts";
import { parsePrometheus } from "../helpers/prometheus.ts";

const plan: Plan = {
  v: PROTOCOL_VERSION,
  epoch: 3,
  policy: "hadis",
  issuedAtMs: 0,
  sloMs: 6_000,
  timeScale: 0.1,
  pair: { light: "model-a", heavy: "model-b" },
  routerThreshold: 0.2,
  discThreshold: 0.3,
  heavyShare: 0.4,
  models: { "model-a": { workers: 2, batchSize: 1 }, "model-b": { workers: 2, batchSize: 1 } },
  assignment: { w1: "model-a", w2: "model-a", w3: "model-b", w4: "model-b" },
  reason: "test",
};

describe("Prometheus gauges of the present", () => {
  it("drop a model no longer queued and the FID of a plan that has none", async () => {
    const samples = async (name: string) => parsePrometheus(await metricsText()).samples.filter((s) => s.name === name);
    recordQueueDepths({ "model-a": 3, "model-b": 1 });
    recordQueueDepths({ "model-b": 2 });
    expect((await samples("hadis_queue_depth")).map((s) => [s.labels.model, s.value])).toEqual([["model-b", 2]]);
    recordPlan({ ...plan, expectedFid: 17.5 });
    expect((await samples("hadis_plan_expected_fid")).map((s) => s.value)).toEqual([17.5]);
    recordPlan({ ...plan, expectedFid: undefined });
    expect((await samples("hadis_plan_expected_fid")).map((s) => s.value)).toEqual([Number.NaN]);
  });
});
