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

  it("a retry answered with its first attempt's reply counts nowhere (that attempt did)", () => {
    expect(sloOutcome({ ...served(9_000), deduplicated: true }, true, 6_000)).toEqual({ served: false, answered: false, violated: false });
  });
});
