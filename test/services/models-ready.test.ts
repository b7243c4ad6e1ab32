/**
 * `hadis start`'s "models loaded" line: when every model of the plan has a worker holding it
 * loaded, and not before (a worker still loading, one that failed, or one holding another model
 * than the plan gives it does not count).
 */
import { describe, expect, it } from "vitest";
import type { Plan, WorkerState } from "../../contracts/messages.ts";
import { describeLoad, planLoad } from "../../services/cli/models-ready.ts";

const plan = {
  models: {
    "sd35-medium": { workers: 1, batchSize: 1 },
    "sd35-large": { workers: 2, batchSize: 1 },
    "sd35-large-turbo": { workers: 0, batchSize: 1 },
  },
  assignment: { "w-0": "sd35-medium", "w-1": "sd35-large", "w-2": "sd35-large" },
} as unknown as Plan;

const worker = (workerId: string, model: string | null, state: WorkerState) => ({ workerId, model, state });

describe("planLoad", () => {
  it("is not ready while a model has no worker holding it loaded", () => {
    const load = planLoad(plan, [
      worker("w-0", "sd35-medium", "idle"),
      worker("w-1", "sd35-large", "loading"),
      worker("w-2", null, "failed"),
    ]);
    expect(load.ready).toBe(false);
    expect(load.models).toEqual([
      { model: "sd35-medium", loaded: 1, planned: 1 },
      { model: "sd35-large", loaded: 0, planned: 2 },
    ]);
  });

  it("is ready once each model of the plan has one loaded worker, counting only assigned workers holding it", () => {
    // w-3 holds sd35-large but the plan does not give it that model (it is about to swap away).
    const load = planLoad(plan, [
      worker("w-0", "sd35-medium", "serving"),
      worker("w-1", "sd35-large", "idle"),
      worker("w-2", "sd35-medium", "unloading"),
      worker("w-3", "sd35-large", "idle"),
    ]);
    expect(load.ready).toBe(true);
    expect(describeLoad(load.models)).toBe("sd35-medium on 1 of 1 worker, sd35-large on 1 of 2 workers");
  });

  it("does not count an assigned worker holding its model while it loads, unloads or has failed", () => {
    for (const state of ["loading", "unloading", "failed", "draining"] as const) {
      const load = planLoad(plan, [
        worker("w-0", "sd35-medium", "idle"),
        worker("w-1", "sd35-large", state),
        worker("w-2", "sd35-large", state),
      ]);
      expect(load.ready, state).toBe(false);
      expect(load.models[1], state).toEqual({ model: "sd35-large", loaded: 0, planned: 2 });
    }
  });

  it("is not ready for a worker holding the model that the plan has given another", () => {
    // w-3 holds sd35-medium, loaded, but the plan gives sd35-medium to w-0 (still loading).
    const load = planLoad(plan, [
      worker("w-0", "sd35-medium", "loading"),
      worker("w-1", "sd35-large", "idle"),
      worker("w-3", "sd35-medium", "idle"),
    ]);
    expect(load.ready).toBe(false);
    expect(load.models[0]).toEqual({ model: "sd35-medium", loaded: 0, planned: 1 });
  });

  it("is not ready for a plan without models", () => {
    expect(planLoad({ models: {}, assignment: {} } as unknown as Plan, []).ready).toBe(false);
  });
});
