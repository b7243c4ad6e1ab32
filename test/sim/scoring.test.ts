import { describe, expect, it } from "vitest";
import { mixFid, planFid, scoreRun, type FidLookup, type RequestRecord } from "../../actors/sim/scoring.ts";
import { renderTable, summarize } from "../../services/cli/research/e1-report.ts";

/** Two models: A alone 30, B alone 20, a mix falls linearly with B's share. */
const fid: FidLookup = {
  alone: (m) => (m === "A" ? 30 : 20),
  mix: (_l, _h, share) => 30 - 10 * share,
  rank: (m) => (m === "A" ? 0 : 1),
};

const records: RequestRecord[] = [
  { arrivalMs: 0, latencyMs: 500, outcome: "served", route: "light", servedModel: "A", servedScore: 0.1 },
  { arrivalMs: 1_000, latencyMs: 1_500, outcome: "served", route: "light→heavy", servedModel: "B", servedScore: 0.2 }, // late
  { arrivalMs: 2_000, latencyMs: null, outcome: "timedOut" },
  { arrivalMs: 6_000, latencyMs: 800, outcome: "served", route: "heavy", servedModel: "B", servedScore: 0.3 },
  { arrivalMs: 7_000, latencyMs: null, outcome: "dropped" },
];
const plans = [
  { atMs: -100, expectedFid: 22 },
  { atMs: 2_500, expectedFid: 20 },
  { atMs: 7_500, expectedFid: 24 },
];

describe("scoreRun", () => {
  it("counts violations (late answers are timed out), goodput, percentiles and routes by hand", () => {
    const s = scoreRun({ policy: "proteus", records, plans, sloMs: 1_000, fid, endMs: 10_000 });
    expect(s.offered).toBe(5);
    expect(s.timedOut).toBe(2);
    expect(s.dropped).toBe(1);
    expect(s.sloViolationRatio).toBeCloseTo(3 / 5, 12);
    expect(s.goodputQps).toBeCloseTo(2 / 10, 12);
    expect(s.p50Ms).toBe(800);
    expect(s.p99Ms).toBe(1_500);
    expect(s.meanServedScore).toBeCloseTo(0.2, 12);
    expect(s.routeShares).toEqual({ light: 1 / 3, "light→heavy": 1 / 3, heavy: 1 / 3 });
    expect(s.windows.map((w) => w.demandQps)).toEqual([0.6, 0.4]);
    expect(s.windows.map((w) => w.sloViolationRatio)).toEqual([2 / 3, 1 / 2]);
  });

  it("scores the others by the served mix: window 0 half A half B → 25, window 1 B alone → 20", () => {
    const s = scoreRun({ policy: "clipper-light", records, plans, sloMs: 1_000, fid, endMs: 10_000 });
    expect(s.windows.map((w) => w.fid)).toEqual([25, 20]);
    expect(s.fid).toBeCloseTo(22.5, 12);
  });

  it("scores cascade policies by the table FID in force, time-weighted: 21 and 22", () => {
    const s = scoreRun({ policy: "hadis", records, plans, sloMs: 1_000, fid, endMs: 10_000 });
    expect(s.windows.map((w) => w.fid)).toEqual([21, 22]);
    expect(s.fid).toBeCloseTo(21.5, 12);
  });

  it("has no violation ratio for a run with no requests (not 0), and the table prints it as –", () => {
    const s = scoreRun({ policy: "hadis", records: [], plans, sloMs: 1_000, fid, endMs: 10_000 });
    expect(s.offered).toBe(0);
    expect(s.sloViolationRatio).toBeNaN();
    // Colour codes for a terminal only (a table redirected to a file had them).
    const plain = renderTable([summarize("hadis", s, 0)], false);
    expect(plain).not.toMatch(/\u001b/);
    const row = plain.split("\n").find((l) => l.includes("hadis"))!;
    expect(row.split("│")[2].trim()).toBe("–");
  });

  it("mixes the two most served models, lighter one as light", () => {
    expect(
      mixFid(
        new Map([
          ["B", 3],
          ["A", 1],
        ]),
        fid,
      ),
    ).toBeCloseTo(30 - 10 * 0.75, 12);
    expect(mixFid(new Map(), fid)).toBeNull();
    expect(planFid([], 0, 5_000)).toBeNull();
  });
});
