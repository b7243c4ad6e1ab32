import { describe, expect, it } from "vitest";
import { validate } from "../../contracts/envelope.ts";
import { deadlineOf, GenerateRequestSchema, MAX_DEADLINE_MS } from "../../contracts/messages.ts";
import { replyWaitMs } from "../../services/client/client.ts";

describe("a request's deadline and how long its caller waits", () => {
  it("keeps a deadline the caller asked for, and waits for it and 5 s more", () => {
    expect(deadlineOf({ deadlineMs: 2_000 }, 60_000)).toBe(2_000);
    expect(replyWaitMs({ deadlineMs: 2_000 })).toBe(7_000);
  });

  it("without one, the router applies the SLO in force, at most 600 s, and the caller waits 605 s", () => {
    expect(MAX_DEADLINE_MS).toBe(600_000);
    expect(deadlineOf({}, 6_000)).toBe(6_000); // the paper's SLO at time scale 0.1
    expect(deadlineOf({}, 60_000)).toBe(60_000);
    expect(deadlineOf({}, 1_200_000)).toBe(600_000); // an SLO at time scale 20: capped
    expect(replyWaitMs({})).toBe(605_000);
  });

  it("refuses a deadline longer than any the caller would wait for", () => {
    expect(validate(GenerateRequestSchema, { prompt: "a cat", deadlineMs: MAX_DEADLINE_MS }, "generate request").deadlineMs).toBe(600_000);
    expect(() => validate(GenerateRequestSchema, { prompt: "a cat", deadlineMs: MAX_DEADLINE_MS + 1 }, "generate request")).toThrow(
      /deadlineMs/,
    );
    expect(replyWaitMs({ deadlineMs: MAX_DEADLINE_MS })).toBeGreaterThan(MAX_DEADLINE_MS);
  });
});
