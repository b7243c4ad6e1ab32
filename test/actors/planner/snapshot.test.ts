import { describe, expect, it } from "vitest";
import { Ewma, queueDelayMs } from "../../../actors/planner/snapshot.ts";

describe("queueDelayMs", () => {
  it("is Little's law with a safety factor", () => {
    expect(queueDelayMs(10, 5)).toBe(2000);
    expect(queueDelayMs(10, 5, 1.5)).toBe(3000);
    expect(queueDelayMs(0, 5)).toBe(0);
  });
  it("stays finite when nothing arrives", () => {
    expect(queueDelayMs(3, 0)).toBe(30_000);
  });
});

describe("Ewma", () => {
  it("starts at the first sample and halves an old value's weight per half-life", () => {
    const e = new Ewma(1000);
    expect(e.value).toBe(0);
    e.update(10, 0);
    expect(e.value).toBe(10);
    expect(e.update(20, 1000)).toBeCloseTo(15, 9);
    expect(e.update(20, 1000)).toBeCloseTo(15, 9); // no time passed, no weight
  });
  it("passes over a sample that is not a finite number (it would stay in the average for good)", () => {
    const e = new Ewma(1000);
    expect(e.update(Number.POSITIVE_INFINITY, 0)).toBe(0);
    e.update(10, 0);
    expect(e.update(Number.NaN, 500)).toBe(10);
    expect(e.update(Number.POSITIVE_INFINITY, 1000)).toBe(10);
    expect(e.update(20, 1000)).toBeCloseTo(15, 9);
  });
  it("rejects a non-positive half-life", () => {
    expect(() => new Ewma(0)).toThrow(RangeError);
  });
});
