import { describe, expect, it } from "vitest";
import { ModelFailures } from "../../../actors/control/model-failures.ts";
import { PROTOCOL_VERSION, type WorkerHeartbeat } from "../../../contracts/messages.ts";

const beat = (workerId: string, state: WorkerHeartbeat["state"], failedModel?: string, model: string | null = null): WorkerHeartbeat => ({
  v: PROTOCOL_VERSION,
  workerId,
  backend: "onnx",
  model,
  state,
  batchSize: 1,
  inFlight: 0,
  servedTotal: 0,
  swapsTotal: 0,
  planEpoch: 1,
  sentAtMs: 0,
  ...(failedModel ? { failedModel, lastError: `load ${failedModel}: missing model file` } : {}),
});
const LIVE = [...Array.from({ length: 16 }, (_, i) => `w${i}`), "big", "small1", "small2"];

describe("ModelFailures", () => {
  it("benches a worker whose load failed alone until the window after its last report, then lets it back", () => {
    const f = new ModelFailures({ benchMs: 10_000 });
    f.observe(beat("w1", "failed", "a"), 1_000);
    expect(f.unavailable(1_000, LIVE)).toEqual({ models: new Set(), workers: new Map([["w1", "a"]]) });
    f.observe(beat("w1", "failed", "a"), 5_000); // still failing: the bench restarts
    expect(f.unavailable(14_000, LIVE).workers).toEqual(new Map([["w1", "a"]]));
    f.observe(beat("w1", "idle"), 14_500); // an idle worker says nothing new
    expect(f.failedLately("w1", 14_999)).toBe("a");
    expect(f.failedLately("w1", 15_000)).toBeUndefined();
    expect(f.unavailable(15_000, LIVE).workers.size).toBe(0);
  });

  it("takes a model out once it failed on two workers, benching neither, until the window after its last failure", () => {
    const f = new ModelFailures({ benchMs: 10_000 });
    f.observe(beat("w1", "failed", "a"), 0);
    f.observe(beat("w2", "failed", "a"), 2_000);
    f.observe(beat("w3", "failed", "b"), 2_000);
    // "a" is broken, not w1 and w2: they are free for other models; w3 alone failed on "b".
    expect(f.unavailable(2_000, LIVE)).toEqual({ models: new Set(["a"]), workers: new Map([["w3", "b"]]) });
    // w1 and w2 serve other models now; w1's report would have expired at 10 s: "a" stays out
    // until 10 s after the last failure (w2's), and nobody is benched for it (w3 still is, for "b").
    f.observe(beat("w1", "serving", undefined, "c"), 3_000);
    f.observe(beat("w2", "serving", undefined, "c"), 3_000);
    expect(f.unavailable(11_000, LIVE)).toEqual({ models: new Set(["a"]), workers: new Map([["w3", "b"]]) });
    expect(f.unavailable(12_000, LIVE).models).toEqual(new Set());
  });

  it("a model that fails again after coming back stays out twice as long, until a worker serves with it", () => {
    const f = new ModelFailures({ benchMs: 1_000, maxBackoff: 4 });
    const failTwice = (at: number) => {
      f.observe(beat("w1", "failed", "a"), at);
      f.observe(beat("w2", "failed", "a"), at);
      return f.unavailable(at, LIVE).models.has("a");
    };
    expect(failTwice(0)).toBe(true);
    expect(f.unavailable(999, LIVE).models.has("a")).toBe(true);
    expect(f.unavailable(1_000, LIVE).models.has("a")).toBe(false);
    expect(failTwice(1_000)).toBe(true);
    expect(f.unavailable(2_999, LIVE).models.has("a")).toBe(true); // 2 x 1 s
    expect(f.unavailable(3_000, LIVE).models.has("a")).toBe(false);
    expect(failTwice(3_000)).toBe(true);
    expect(f.unavailable(6_999, LIVE).models.has("a")).toBe(true); // 4 x 1 s
    expect(f.unavailable(7_000, LIVE).models.has("a")).toBe(false);
    expect(failTwice(7_000)).toBe(true);
    expect(f.unavailable(11_000, LIVE).models.has("a")).toBe(false); // capped at 4 x
    // A worker that loads it and serves nothing has not shown it works: still 4 x.
    f.observe(beat("w5", "serving", undefined, "a"), 11_200);
    f.observe(beat("w5", "serving", undefined, "a"), 11_300);
    f.observe(beat("w5", "idle"), 11_350);
    expect(failTwice(11_400)).toBe(true);
    expect(f.unavailable(15_399, LIVE).models.has("a")).toBe(true);
    // Back; one that makes images with it: forgiven, the next failure costs one window again.
    expect(f.unavailable(15_450, LIVE).models.has("a")).toBe(false);
    f.observe(beat("w5", "serving", undefined, "a"), 15_500);
    f.observe({ ...beat("w5", "serving", undefined, "a"), servedTotal: 4 }, 15_600);
    f.observe(beat("w5", "idle"), 15_800);
    expect(failTwice(16_000)).toBe(true);
    expect(f.unavailable(17_000, LIVE).models.has("a")).toBe(false);
  });

  it("a model whose batches fail on the workers that load it goes out as one that will not load", () => {
    const f = new ModelFailures({ benchMs: 1_000 });
    // Loaded, and serving: not failing yet. w2 makes images with it.
    f.observe(beat("w1", "serving", undefined, "a"), 0);
    f.observe(beat("w2", "serving", undefined, "a"), 0);
    f.observe({ ...beat("w2", "serving", undefined, "a"), servedTotal: 2 }, 100);
    expect(f.unavailable(100, LIVE)).toEqual({ models: new Set(), workers: new Map() });
    // Its batches fail on w1 (failed, the model still loaded): benched while w2 makes images with it.
    expect(f.observe(beat("w1", "failed", "a", "a"), 500)).toBe(true);
    expect(f.unavailable(500, LIVE)).toEqual({ models: new Set(), workers: new Map([["w1", "a"]]) });
    // And on w2, whose failure also ends its serving: the model is broken, not the workers. w3
    // has it loaded and has made nothing with it: that does not show it runs.
    f.observe(beat("w3", "serving", undefined, "a"), 550);
    expect(f.observe(beat("w2", "failed", "a", "a"), 600)).toBe(true);
    expect(f.observe(beat("w2", "failed", "a", "a"), 700)).toBe(false); // the same failure again
    expect(f.unavailable(700, LIVE)).toEqual({ models: new Set(["a"]), workers: new Map() });
    expect(f.unavailable(1_699, LIVE).models.has("a")).toBe(true);
    expect(f.unavailable(1_700, LIVE).models.has("a")).toBe(false);
    // Out again, and w3 makes images with it while it is out (a plan not yet replaced): it runs,
    // so it comes back with no strikes, and its next time out is one window.
    f.observe(beat("w1", "failed", "a", "a"), 1_800);
    f.observe(beat("w2", "failed", "a", "a"), 1_800);
    expect(f.unavailable(1_800, LIVE).models.has("a")).toBe(true);
    f.observe({ ...beat("w3", "serving", undefined, "a"), servedTotal: 1 }, 1_900);
    f.observe(beat("w3", "idle"), 2_000);
    expect(f.unavailable(3_800, LIVE).models.has("a")).toBe(false); // 2 x 1 s, as it went out
    f.observe(beat("w1", "failed", "a", "a"), 3_900);
    f.observe(beat("w2", "failed", "a", "a"), 3_900);
    expect(f.unavailable(3_900, LIVE).models.has("a")).toBe(true);
    expect(f.unavailable(4_900, LIVE).models.has("a")).toBe(false);
  });

  it("a worker that has loaded a model keeps it in the pool when only loads failed", () => {
    const f = new ModelFailures({ benchMs: 1_000 });
    f.observe(beat("big", "serving", undefined, "x"), 0);
    f.observe(beat("small1", "failed", "x"), 0);
    f.observe(beat("small2", "failed", "x"), 0);
    expect(f.unavailable(0, LIVE).models.size).toBe(0);
    // The same with a failure to run: "big" has to make an image first.
    f.observe(beat("small2", "failed", "x", "x"), 10);
    expect(f.unavailable(10, LIVE).models).toEqual(new Set(["x"]));
  });

  it("a model a live worker serves stays in the pool: the workers that cannot load it are benched, twice as long each time", () => {
    const f = new ModelFailures({ benchMs: 1_000 });
    f.observe(beat("big", "serving", undefined, "x"), 0);
    f.observe(beat("small1", "failed", "x"), 0);
    f.observe(beat("small2", "failed", "x"), 0);
    expect(f.unavailable(0, LIVE)).toEqual({
      models: new Set(),
      workers: new Map([
        ["small1", "x"],
        ["small2", "x"],
      ]),
    });
    f.observe(beat("small1", "failed", "x"), 500); // the same bench: no longer
    expect(f.unavailable(1_499, LIVE).workers.has("small1")).toBe(true);
    expect(f.unavailable(1_500, LIVE).workers.has("small1")).toBe(false);
    // Back, given x again, and failing: benched for 2 s this time; then 4 s.
    f.observe(beat("small1", "failed", "x"), 2_000);
    expect(f.unavailable(3_999, LIVE).workers.has("small1")).toBe(true);
    expect(f.unavailable(4_000, LIVE).workers.has("small1")).toBe(false);
    f.observe(beat("small1", "failed", "x"), 4_500);
    expect(f.unavailable(8_499, LIVE).workers.has("small1")).toBe(true);
    expect(f.unavailable(8_500, LIVE).workers.has("small1")).toBe(false);
    // Once it serves something, a failure benches it for one window again.
    f.observe(beat("small1", "serving", undefined, "y"), 9_000);
    f.observe({ ...beat("small1", "serving", undefined, "y"), servedTotal: 2 }, 9_200);
    f.observe(beat("small1", "failed", "x"), 9_500);
    expect(f.unavailable(10_500, LIVE).workers.has("small1")).toBe(false);
    // With "big" gone (dead: not live), the failures say the model is broken.
    f.observe(beat("small1", "failed", "x"), 11_000);
    f.observe(beat("small2", "failed", "x"), 11_000);
    expect(
      f.unavailable(
        11_000,
        LIVE.filter((id) => id !== "big"),
      ).models,
    ).toEqual(new Set(["x"]));
  });

  it("a worker that drains forgets its failures: back with the same id, it is planned at once", () => {
    const f = new ModelFailures();
    f.observe(beat("w1", "failed", "a"), 0);
    expect(f.failedLately("w1", 10)).toBe("a");
    f.observe(beat("w1", "draining"), 20);
    f.observe(beat("w1", "idle"), 30);
    expect(f.failedLately("w1", 40)).toBeUndefined();
    expect(f.unavailable(40, LIVE).workers.size).toBe(0);
  });

  it("forgets what it knew of workers no longer alive", () => {
    const f = new ModelFailures({ benchMs: 1_000 });
    f.observe(beat("w1", "serving", undefined, "x"), 0);
    f.observe(beat("w2", "failed", "y"), 0);
    f.unavailable(0, ["w3"]); // w1 and w2 gone
    const state = f as unknown as { serving: Map<string, string>; benches: Map<string, number> };
    expect([state.serving.size, state.benches.size]).toEqual([0, 0]);
    // w1's serving no longer keeps "x" in the pool once w1 is gone.
    f.observe(beat("w3", "failed", "x"), 10);
    expect(f.unavailable(10, ["w3"]).models).toEqual(new Set(["x"]));
  });

  it("counts live workers only: with one live worker, its failure takes the model out, a dead worker's does not count", () => {
    const f = new ModelFailures();
    f.observe(beat("w1", "failed", "a"), 0);
    f.observe(beat("gone", "failed", "a"), 0);
    expect(f.unavailable(0, ["w1"])).toEqual({ models: new Set(["a"]), workers: new Map() });
    const g = new ModelFailures();
    g.observe(beat("w1", "failed", "a"), 0);
    g.observe(beat("gone", "failed", "a"), 0);
    expect(g.unavailable(0, ["w1", "w2"])).toEqual({ models: new Set(), workers: new Map([["w1", "a"]]) });
  });

  it("a failed batch (no failedModel) or another state benches nobody", () => {
    const f = new ModelFailures();
    f.observe(beat("w1", "failed", undefined, "a"), 0);
    f.observe({ ...beat("w2", "serving", undefined, "b"), failedModel: "a" }, 0);
    expect(f.unavailable(0, LIVE).workers.size).toBe(0);
  });
});
