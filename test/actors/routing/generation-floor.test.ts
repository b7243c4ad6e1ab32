import { describe, expect, it } from "vitest";
import { GenerationFloor } from "../../../actors/routing/generation-floor.ts";

describe("GenerationFloor", () => {
  it("is 0 for a model not seen, then the least of its recent generations, forgetting older ones", () => {
    const floor = new GenerationFloor(3);
    expect(floor.floorMs("m")).toBe(0);
    for (const ms of [900, 400, 700]) floor.observe("m", ms);
    expect(floor.floorMs("m")).toBe(400);
    floor.observe("other", 5);
    expect(floor.floorMs("m")).toBe(400); // per model
    for (const ms of [800, 850]) floor.observe("m", ms); // 400 leaves the window of 3
    expect(floor.floorMs("m")).toBe(700);
    floor.observe("m", Number.NaN);
    floor.observe("m", -1);
    expect(floor.floorMs("m")).toBe(700); // nonsense is not a time
  });
});
