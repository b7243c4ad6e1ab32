/** What a router knows of capacity: the plan in force, and the workers it hears, on a simulated clock. */
import { describe, expect, it } from "vitest";
import { capacityRefusal, NO_WORKER_RETRY_MS, WorkerSightings } from "../../../actors/routing/capacity.ts";
import type { Plan } from "../../../contracts/messages.ts";

const plan = (models: Record<string, number>, assignment: Record<string, string> = {}): Plan => ({
  v: 1,
  epoch: 4,
  policy: "static",
  issuedAtMs: 0,
  sloMs: 6_000,
  timeScale: 0.1,
  pair: { light: "a", heavy: "b" },
  routerThreshold: 0.2,
  discThreshold: 0.1,
  heavyShare: 0.3,
  models: Object.fromEntries(Object.entries(models).map(([m, workers]) => [m, { workers, batchSize: 1 }])),
  assignment,
  reason: "test plan",
});
const beat = (workerId: string, model: string | null, state: "serving" | "loading" | "draining" = "serving") => ({
  workerId,
  model,
  state,
});

describe("capacityRefusal", () => {
  it("refuses work on a model the plan in force gives no worker, saying so, with a retry hint", () => {
    const err = capacityRefusal("b", plan({ a: 1, b: 0 }), null, 0);
    expect(err?.code).toBe("no_capacity");
    expect(err?.message).toBe("no worker serves b: the plan in force (epoch 4) gives it none (test plan)");
    expect(err?.details).toMatchObject({ retryAfterMs: NO_WORKER_RETRY_MS, model: "b" });
    expect(capacityRefusal("a", plan({ a: 1, b: 0 }), null, 0)).toBeNull();
    expect(capacityRefusal("a", plan({ a: 0, b: 0 }), null, 0)?.message).toBe(
      "no worker is serving: the plan in force (epoch 4) has none (test plan)",
    );
  });

  it("judges nothing from heartbeats until it has listened as long as a worker may be silent, and again after a reconnect", () => {
    const seen = new WorkerSightings(3_000, 0);
    const p = plan({ a: 1, b: 1 }, { w1: "a", w2: "b" });
    expect(capacityRefusal("a", p, seen, 2_999)).toBeNull(); // heard no one yet, but not long enough to tell
    expect(capacityRefusal("a", p, seen, 3_000)?.message).toBe("no worker of a heard from for 3000 ms (no worker heard at all)");
    seen.observe(beat("w2", "b"), 3_100);
    expect(capacityRefusal("a", p, seen, 3_200)?.message).toBe("no worker of a heard from for 3000 ms (1 worker heard, none holding it)");
    seen.listenAgain(3_200);
    expect(capacityRefusal("a", p, seen, 6_100)).toBeNull();
    seen.deaf();
    expect(capacityRefusal("a", p, seen, 1e9)).toBeNull();
  });

  it("counts a worker that holds the model, or that the plan gives it (loading), while heard lately; not one draining", () => {
    const seen = new WorkerSightings(3_000, 0);
    const p = plan({ a: 1, b: 1 }, { w1: "a", w2: "b" });
    seen.observe(beat("w1", null, "loading"), 3_000); // given a by the plan, loading it
    seen.observe(beat("w9", "b"), 3_000); // not in the plan yet, holds b
    expect(seen.serving("a", p, 4_000)).toBe(1);
    expect(seen.serving("b", p, 4_000)).toBe(1);
    expect(capacityRefusal("b", p, seen, 4_000)).toBeNull();
    seen.observe(beat("w9", "b", "draining"), 4_100);
    expect(capacityRefusal("b", p, seen, 4_200)?.code).toBe("no_capacity");
    // Silent past 3 s: gone.
    expect(capacityRefusal("a", p, seen, 6_001)?.code).toBe("no_capacity");
  });
});
