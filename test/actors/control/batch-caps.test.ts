import { describe, expect, it } from "vitest";
import { BatchCaps } from "../../../actors/control/batch-caps.ts";
import { PROTOCOL_VERSION, type WorkerHeartbeat } from "../../../contracts/messages.ts";

const beat = (workerId: string, model: string | null, batchCap?: number): WorkerHeartbeat => ({
  v: PROTOCOL_VERSION,
  workerId,
  backend: "onnx",
  model,
  state: "serving",
  batchSize: batchCap ?? 8,
  inFlight: 0,
  servedTotal: 0,
  swapsTotal: 0,
  planEpoch: 1,
  sentAtMs: 0,
  ...(batchCap !== undefined ? { batchCap } : {}),
});

describe("BatchCaps", () => {
  it("keeps each model's smallest cap reported until it has gone unreported for the hold time", () => {
    const caps = new BatchCaps(10_000);
    expect(caps.observe(beat("w1", "a"), 0)).toBe(false); // no cap
    expect(caps.observe(beat("w1", "a", 4), 0)).toBe(true);
    expect(caps.observe(beat("w2", "a", 2), 1_000)).toBe(true); // lower: news
    expect(caps.observe(beat("w1", "a", 4), 2_000)).toBe(false); // higher: the smaller holds
    expect(caps.observe(beat("w3", "b", 8), 2_000)).toBe(true);
    expect(caps.current(2_000)).toEqual(
      new Map([
        ["a", 2],
        ["b", 8],
      ]),
    );
    // Workers that reload forget their caps: the planner holds them a while.
    expect(caps.current(11_999)).toEqual(
      new Map([
        ["a", 2],
        ["b", 8],
      ]),
    );
    expect(caps.current(12_000)).toEqual(new Map());
    expect(caps.observe(beat("w1", "a", 4), 13_000)).toBe(true); // afresh
    expect(caps.current(13_000)).toEqual(new Map([["a", 4]]));
  });
});
