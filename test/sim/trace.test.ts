import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  futureDemandOracle,
  parseHourlyInvocations,
  ratePerSecond,
  stepTrace,
  traceFromHourly,
  traceFromRates,
} from "../../actors/sim/trace.ts";

const csv = (...lines: string[]) => lines.join("\n") + "\n";

describe("parseHourlyInvocations", () => {
  it("reads invocations in hour order, with the pandas index column and CRLF", () => {
    expect(parseHourlyInvocations(",hour,invocations\r\n0,0,5.5\r\n1,1,7\r\n2,2,6\r\n")).toEqual([5.5, 7, 6]);
    expect(parseHourlyInvocations(csv("hour,invocations", "3,1", "4,2"))).toEqual([1, 2]);
    expect(
      parseHourlyInvocations(
        readFileSync(new URL("../../profiles/reference/traces/azure_invocations_hourly.csv", import.meta.url), "utf8"),
      ),
    ).toHaveLength(347);
  });

  it("refuses an empty file, a missing column and a header without rows", () => {
    expect(() => parseHourlyInvocations("")).toThrow(/empty/);
    expect(() => parseHourlyInvocations("\n  \n")).toThrow(/empty/);
    expect(() => parseHourlyInvocations(csv(",invocations", "0,1"))).toThrow(/line 1: no "hour" column/);
    expect(() => parseHourlyInvocations(csv(",hour", "0,1"))).toThrow(/line 1: no "invocations" column/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations"))).toThrow(/no rows/);
  });

  it("refuses a missing or repeated hour, naming the line", () => {
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,2,6"))).toThrow(
      /line 3: hour 2 follows hour 0 \(hour 1 missing\)/,
    );
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,0,6"))).toThrow(/line 3: hour 0 follows hour 0/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "", "1,,6"))).toThrow(/line 4: empty hour/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0.5,5"))).toThrow(/line 2: hour "0.5" is not a whole number/);
  });

  it("refuses an empty, missing or non-numeric invocations cell, naming the line", () => {
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,1,"))).toThrow(/line 3: empty invocations/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,1"))).toThrow(/line 3: empty invocations/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,many"))).toThrow(
      /line 2: invocations "many" is not a non-negative number/,
    );
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,-3"))).toThrow(/line 2: invocations "-3"/);
  });
});

describe("traces made from rates, and the clairvoyant bound's oracle", () => {
  it("stepTrace keeps the low rate before the step and the high one after (Poisson counts per second)", () => {
    const arrivals = stepTrace({ lowQps: 2, highQps: 40, stepAtS: 100, seconds: 200, seed: 7, promptCount: 50 });
    const before = arrivals.filter((a) => a.atMs < 100_000).length;
    const after = arrivals.length - before;
    expect(before / 100).toBeGreaterThan(1.5);
    expect(before / 100).toBeLessThan(2.5);
    expect(after / 100).toBeGreaterThan(36);
    expect(after / 100).toBeLessThan(44);
    expect(arrivals.every((a, i) => i === 0 || a.atMs >= arrivals[i - 1].atMs)).toBe(true);
    expect(arrivals.every((a) => a.promptIdx >= 0 && a.promptIdx < 50)).toBe(true);
    expect(stepTrace({ lowQps: 2, highQps: 40, stepAtS: 100, seconds: 200, seed: 7, promptCount: 50 })).toEqual(arrivals);
  });

  it("traceFromHourly is traceFromRates over the scaled hourly rates", () => {
    const hourly = [1, 4, 2, 8];
    const opts = { seed: 3, promptCount: 10, minQps: 1, maxQps: 16, seconds: 20 };
    expect(traceFromHourly(hourly, opts)).toEqual(traceFromRates(ratePerSecond(hourly, opts), 3, 10));
  });

  it("futureDemandOracle counts the arrivals of the coming window, per second", () => {
    const arrivals = [0, 100, 200, 1_000, 1_500, 1_600, 3_000].map((atMs, promptIdx) => ({ atMs, promptIdx }));
    const oracle = futureDemandOracle(arrivals, 1_000);
    expect(oracle(0)).toBe(3); // 0, 100, 200
    expect(oracle(1_000)).toBe(3); // 1,000, 1,500, 1,600
    expect(oracle(2_000)).toBe(0);
    expect(oracle(2_500)).toBe(1); // 3,000
    expect(futureDemandOracle(arrivals, 2_000)(0)).toBe(3); // six in two seconds
  });
});
