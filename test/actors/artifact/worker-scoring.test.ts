import { describe, expect, it } from "vitest";
import { artifactBatchKey, artifactExecMs, artifactPlannerMs } from "../../../actors/artifact/runtimes.ts";
import {
  densify,
  dominantFidOf,
  mixFidOf,
  roundHalfEven,
  scoreArtifactRows,
  smooth,
  type ArtifactFidTables,
} from "../../../actors/artifact/scoring.ts";
import type { LedgerRow } from "../../../actors/artifact/ledger.ts";
import { ArtifactRouterThreshold, artifactQualified, percentileEntry, takeArtifactBatch } from "../../../actors/artifact/worker-rules.ts";
import { artifactFidTables } from "../../../actors/artifact/score-run.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const profiles = loadProfiles();
const turbo = profiles.byName.get("sd35-large-turbo")!;
const lightning = profiles.byName.get("sdxl-lightning")!;

describe("the artifact's latency tables", () => {
  it("runs batches of 9-15 and 17-31 at the batch-4 latency and interpolates 3, 5, 6, 7", () => {
    expect(artifactBatchKey(12)).toBe(4);
    expect(artifactBatchKey(20)).toBe(4);
    expect(artifactBatchKey(16)).toBe(16);
    // sd3.5-large-turbo at time scale 0.1: 130, 234, 468, 936 ms at 1, 2, 4, 8.
    expect(artifactExecMs(turbo, 12, 0.1)).toBeCloseTo(468, 9);
    expect(artifactExecMs(turbo, 3, 0.1)).toBeCloseTo((234 + 468) / 2, 9);
    expect(artifactExecMs(turbo, 5, 0.1)).toBeCloseTo((234 + 936) / 2, 9);
    expect(artifactExecMs(turbo, 6, 0.1)).toBeCloseTo((468 + 936) / 2, 9);
    expect(artifactExecMs(turbo, 7, 0.1)).toBeCloseTo(((468 + 936) / 2 + 936) / 2, 9);
  });

  it("shows the planners latencies rounded to 0.1 s (sdxl-lightning at batch 1 reads 100 ms, sd3.5-large-turbo at 4 reads 500)", () => {
    expect(artifactPlannerMs(lightning, 1, 0.1)).toBe(100);
    expect(artifactPlannerMs(lightning, 32, 0.1)).toBe(1_400);
    expect(artifactPlannerMs(turbo, 1, 0.1)).toBe(100);
    expect(artifactPlannerMs(turbo, 4, 0.1)).toBe(500);
    expect(artifactPlannerMs(turbo, 32, 0.1)).toBe(3_700);
  });
});

describe("an artifact worker's own decisions", () => {
  it("drops at dequeue a query whose elapsed time plus the forming batch's runtime passes 1.5 × SLO, and runs the rest", () => {
    // Elapsed times of queued queries, ms; runtime 1,000 ms a batch of any size; limit 9,000.
    const queue = [8_500, 1_000, 7_999, 8_001];
    const { batch, dropped } = takeArtifactBatch(
      queue,
      4,
      () => 1_000,
      (e) => e,
      9_000,
    );
    expect(batch).toEqual([1_000, 7_999]);
    expect(dropped).toEqual([8_500, 8_001]);
    expect(queue).toEqual([]);
  });

  it("checks each pop against the batch size min(batch, taken + queued): a short queue is checked at the smaller batch", () => {
    const seen: number[] = [];
    takeArtifactBatch(
      [0, 0],
      8,
      (n) => (seen.push(n), 10),
      () => 0,
      9_000,
    );
    expect(seen).toEqual([2, 2]);
    const rest = [0, 0, 0];
    const { batch } = takeArtifactBatch(
      rest,
      2,
      () => 10,
      () => 0,
      9_000,
    );
    expect(batch).toHaveLength(2);
    expect(rest).toHaveLength(1);
  });

  it("reads thresholds as the entry at int(N × q) − 1 of the sorted scores: share 0 passes every light image, share 1 only the best", () => {
    const sorted = [0.1, 0.2, 0.3, 0.4];
    expect(percentileEntry(sorted, 0.5)).toBe(0.2);
    expect(percentileEntry(sorted, 0)).toBe(0.1);
    expect(sorted.every((s) => artifactQualified(s, sorted, 0))).toBe(true);
    expect(sorted.filter((s) => artifactQualified(s, sorted, 1))).toEqual([0.4]);
    expect(sorted.filter((s) => artifactQualified(s, sorted, 0.5))).toEqual([0.2, 0.3, 0.4]);
  });

  it("routes a prompt straight to the heavy model when its score is at or above the (1 − r) entry; at r = 0 only the top score", () => {
    const router = new ArtifactRouterThreshold([5, 1, 4, 2, 3]);
    // int(5 × 0.6) − 1 = 2: the entry one below the cut, so 3 of 5 prompts are hard at r = 0.4.
    expect([1, 2, 3, 4, 5].filter((s) => router.isHard(s, 0.4))).toEqual([3, 4, 5]);
    expect([1, 2, 3, 4, 5].filter((s) => router.isHard(s, 0))).toEqual([5]);
  });
});

describe("the artifact's scoring", () => {
  const tables: ArtifactFidTables = artifactFidTables(profiles);

  it("holds the parser's tables: single models and the six pair curves, densified by rounded midpoints", () => {
    expect(tables.single).toEqual({ 0: 29.76, 1: 25.23, 2: 20.61, 3: 19.95 });
    expect(tables.cascade["1,3"]).toHaveLength(11);
    expect(densify([25.23, 23.96, 23.13]).slice(0, 4)).toEqual([25.23, 24.6, 23.96, 23.55]);
    expect(roundHalfEven(2.5)).toBe(2);
    expect(roundHalfEven(3.5)).toBe(4);
  });

  it("reads a window's FID from its query mix: idle 29.76, one model alone, two by the second's share of all (rounded to 0.05)", () => {
    expect(mixFidOf([0, 0, 0, 0], tables)).toBe(29.76);
    expect(mixFidOf([0, 0, 0, 7], tables)).toBe(19.95);
    // DiffServe: the light model counts every query, the heavy its escalations: 100 and 50 → share 0.35 of (1,3).
    const s = mixFidOf([0, 100, 0, 50], tables);
    expect(s).toBe(densify(tables.cascade["1,3"])[7]);
    // More than two models: the two lowest indices, by the second's share of the whole window.
    expect(mixFidOf([10, 10, 0, 80], tables)).toBe(densify(tables.cascade["0,1"])[roundHalfEven(10 / 100 / 0.05)]);
    expect(dominantFidOf([3, 9, 9, 0], tables)).toBe(25.23);
  });

  it("scores whole windows of 5 rows, smoothed over 5 points, from the first row with an outcome when the run is long enough", () => {
    const row = (atMs: number, total: number, bad: number, configFid: number | null = 20): LedgerRow => ({
      atMs,
      succeed: total - bad,
      timeout: bad,
      drop: 0,
      total,
      arrivals: [0, total, 0, 0],
      configFid,
    });
    const rows = [row(0, 0, 0), row(1_000, 0, 0), ...Array.from({ length: 27 }, (_, i) => row(2_000 + i * 1_000, 10, i < 5 ? 10 : 0))];
    // `find_offset`: min(first row with an outcome, rows − length): a run shorter than the plot's
    // length is read from its first row, idle rows included.
    const short = scoreArtifactRows(rows, "config", tables, 360);
    expect(short.offset).toBe(0);
    expect(short.rows).toBe(25);
    expect(short.windowSlo).toEqual([1, 0.4, 0, 0, 0]);
    expect(short.sloViolationRatio).toBeCloseTo(1.4 / 5, 12);
    const long = scoreArtifactRows(rows, "config", tables, 25);
    expect(long.offset).toBe(2);
    expect(long.windowSlo).toEqual([1, 0, 0, 0, 0]);
    expect(long.sloViolationRatio).toBeCloseTo(0.2, 12);
    expect(long.fid).toBeCloseTo(20, 12);
    expect(smooth([1, 2, 3, 4, 5, 6], 5)).toEqual([3, 4]);
  });
});
