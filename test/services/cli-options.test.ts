import { describe, expect, it } from "vitest";
import { atLeastOne, count, num, port } from "../../services/cli/options.ts";

describe("CLI option parsers", () => {
  it("refuse empty and blank values instead of reading them as 0", () => {
    for (const parse of [num, count, port, atLeastOne]) {
      expect(() => parse("")).toThrow(/not a number/);
      expect(() => parse("  ")).toThrow(/not a number/);
    }
    expect(port("0")).toBe(0); // a free port, on purpose
  });

  it("want at least one worker or router", () => {
    expect(() => atLeastOne("0")).toThrow(/at least 1/);
    expect(() => atLeastOne("2.5")).toThrow(/whole number/);
    expect(atLeastOne("16")).toBe(16);
  });
});
