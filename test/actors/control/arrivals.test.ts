import { describe, expect, it } from "vitest";
import { ArrivalRate } from "../../../actors/control/arrivals.ts";

describe("ArrivalRate", () => {
  it("reads the rate the routers report, however the ticks fall", () => {
    const rate = new ArrivalRate();
    // Two routers at 40 and 10 qps, reporting every second; ticks at 0.5 s, then 0.2 s, then 2 s.
    let now = 0;
    const second = () => {
      now += 1_000;
      rate.report("r1", 40, 1_000, now);
      rate.report("r2", 10, 1_000, now);
    };
    second();
    expect(rate.sample(now + 500, 3_000)).toEqual({ qps: 50, routers: 2 });
    // A tick 200 ms later, no report since: the last rates, not 0.
    expect(rate.sample(now + 700, 3_000).qps).toBe(50);
    second();
    second();
    expect(rate.sample(now, 3_000).qps).toBe(50); // two reports since: still their rate, not twice it
    rate.report("r1", 90, 1_500, now + 1_500);
    expect(rate.sample(now + 1_500, 3_000).qps).toBe(60 + 10);
  });

  it("forgets a router silent past the limit", () => {
    const rate = new ArrivalRate();
    rate.report("r1", 20, 1_000, 1_000);
    rate.report("r2", 20, 1_000, 3_500);
    expect(rate.sample(4_500, 3_000)).toEqual({ qps: 20, routers: 1 });
  });
});
