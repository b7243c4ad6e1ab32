import { describe, expect, it } from "vitest";
import { deadlineOf, MAX_DEADLINE_MS } from "../../contracts/messages.ts";
import { replyWaitMs } from "../../services/client/client.ts";

describe("a request's deadline and how long its caller waits", () => {
  it("keeps a deadline the caller asked for, and waits for it", () => {
    expect(deadlineOf({ deadlineMs: 2_000 }, 60_000)).toBe(2_000);
    expect(replyWaitMs({ deadlineMs: 2_000 })).toBe(7_000);
  });

  it("without one, the caller outwaits whatever SLO the router applies (60 s times any time scale)", () => {
    for (const sloMs of [6_000, 60_000, 120_000, 1_200_000]) {
      const deadline = deadlineOf({}, sloMs);
      expect(deadline).toBe(Math.min(sloMs, MAX_DEADLINE_MS));
      expect(replyWaitMs({})).toBeGreaterThan(deadline);
    }
  });
});
