import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseHourlyInvocations } from "../../actors/sim/trace.ts";

const csv = (...lines: string[]) => lines.join("\n") + "\n";

describe("parseHourlyInvocations", () => {
  it("reads invocations in hour order, with the pandas index column and CRLF", () => {
    expect(parseHourlyInvocations(",hour,invocations\r\n0,0,5.5\r\n1,1,7\r\n2,2,6\r\n")).toEqual([5.5, 7, 6]);
    expect(parseHourlyInvocations(csv("hour,invocations", "3,1", "4,2"))).toEqual([1, 2]);
    expect(parseHourlyInvocations(readFileSync(new URL("../../profiles/reference/traces/azure_invocations_hourly.csv", import.meta.url), "utf8"))).toHaveLength(347);
  });

  it("refuses an empty file, a missing column and a header without rows", () => {
    expect(() => parseHourlyInvocations("")).toThrow(/empty/);
    expect(() => parseHourlyInvocations("\n  \n")).toThrow(/empty/);
    expect(() => parseHourlyInvocations(csv(",invocations", "0,1"))).toThrow(/line 1: no "hour" column/);
    expect(() => parseHourlyInvocations(csv(",hour", "0,1"))).toThrow(/line 1: no "invocations" column/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations"))).toThrow(/no rows/);
  });

  it("refuses a missing or repeated hour, naming the line", () => {
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,2,6"))).toThrow(/line 3: hour 2 follows hour 0 \(hour 1 missing\)/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,0,6"))).toThrow(/line 3: hour 0 follows hour 0/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "", "1,,6"))).toThrow(/line 4: empty hour/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0.5,5"))).toThrow(/line 2: hour "0.5" is not a whole number/);
  });

  it("refuses an empty, missing or non-numeric invocations cell, naming the line", () => {
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,1,"))).toThrow(/line 3: empty invocations/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,5", "1,1"))).toThrow(/line 3: empty invocations/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,many"))).toThrow(/line 2: invocations "many" is not a non-negative number/);
    expect(() => parseHourlyInvocations(csv(",hour,invocations", "0,0,-3"))).toThrow(/line 2: invocations "-3"/);
  });
});
