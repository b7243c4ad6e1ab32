import { describe, expect, it } from "vitest";
import { sloOutcome } from "../../actors/request/reply.ts";
import type { GenerateReply } from "../../contracts/messages.ts";

const served = (totalMs: number) => ({ timings: { totalMs } }) as GenerateReply;

describe("sloOutcome (one rule for the metrics and the routers' reports)", () => {
  it("served in time, served late, failed after acceptance, refused at the edge", () => {
    expect(sloOutcome(served(5_999), true, 6_000)).toEqual({ served: true, answered: true, violated: false });
    expect(sloOutcome(served(6_001), true, 6_000)).toEqual({ served: true, answered: true, violated: true });
    expect(sloOutcome(null, true, 6_000)).toEqual({ served: false, answered: true, violated: true });
    expect(sloOutcome(null, false, 6_000)).toEqual({ served: false, answered: false, violated: false });
  });

  it("a request given less time than the SLO counts in no SLO figure, served or not; one given the SLO or more does", () => {
    // A caller's 50 ms deadline that expired is not the system missing its 6 s SLO.
    expect(sloOutcome(null, true, 6_000, 50)).toEqual({ served: false, answered: false, violated: false });
    expect(sloOutcome(served(40), true, 6_000, 50)).toEqual({ served: true, answered: false, violated: false });
    expect(sloOutcome(null, true, 6_000, 6_000)).toEqual({ served: false, answered: true, violated: true });
    // A longer deadline than the SLO: served after the SLO is still a violation.
    expect(sloOutcome(served(8_000), true, 6_000, 20_000)).toEqual({ served: true, answered: true, violated: true });
  });

  it("a retry answered with its first attempt's reply counts nowhere (that attempt did)", () => {
    expect(sloOutcome({ ...served(9_000), deduplicated: true }, true, 6_000)).toEqual({ served: false, answered: false, violated: false });
  });
});
