/**
 * The gauges that describe the present: a model no longer queued, or a plan without an FID
 * estimate, leaves no stale value behind. (Apart from metrics.test.ts, whose running manager
 * records its own queue depths every tick.)
 */
import { describe, expect, it } from "vitest";
import { metricsText, recordPlan, recordQueueDepths } from "../../services/telemetry/metrics.ts";
import { parsePrometheus } from "../helpers/prometheus.ts";
import { plan as planOf } from "../helpers/worker-fakes.ts";

const plan = planOf(3, "a");

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
