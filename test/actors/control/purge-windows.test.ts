import { describe, expect, it } from "vitest";
import { PurgeWindows } from "../../../actors/control/purge-windows.ts";

describe("PurgeWindows", () => {
  it("purges what was queued before a window began, once the window has run; a model served again is forgotten", () => {
    const w = new PurgeWindows(5_000);
    // The model loses its workers: a window starts (nothing to purge yet).
    expect(w.due(["m"], 0)).toEqual({ ended: [], starting: ["m"] });
    w.open(["m"], 41, 0); // items up to 41 were queued before it
    expect(w.due(["m"], 4_999)).toEqual({ ended: [], starting: [] });
    // Ended: items below 42 go, and the next window starts.
    expect(w.due(["m"], 5_000)).toEqual({ ended: [{ model: "m", beforeSeq: 42, sinceMs: 0 }], starting: ["m"] });
    w.open(["m"], 50, 5_000);
    expect(w.due(["m"], 10_000).ended).toEqual([{ model: "m", beforeSeq: 51, sinceMs: 5_000 }]);
    // Served again, then idle again: a fresh window, nothing purged at once.
    expect(w.due([], 11_000)).toEqual({ ended: [], starting: [] });
    expect(w.due(["m"], 12_000)).toEqual({ ended: [], starting: ["m"] });
  });
});
