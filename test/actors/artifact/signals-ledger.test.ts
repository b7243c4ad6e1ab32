import { describe, expect, it } from "vitest";
import { ARTIFACT, ARTIFACT_MECHANISMS, NATIVE, parseFidelity } from "../../../actors/artifact/mechanisms.ts";
import { ControllerLedger } from "../../../actors/artifact/ledger.ts";
import { SignalTracker, WindowedEwma } from "../../../actors/artifact/signals.ts";

/** pandas `ewm(halflife=3, adjust=False)`: alpha = 1 − 2^(−1/3). */
const ALPHA = 1 - Math.pow(2, -1 / 3);

describe("fidelity switches", () => {
  it("native has none on, artifact all, and a list turns single mechanisms on or off by name", () => {
    expect(parseFidelity("native")).toBe(NATIVE);
    expect(parseFidelity("artifact")).toBe(ARTIFACT);
    const one = parseFidelity("native", "dispatch");
    expect([...one.on]).toEqual(["dispatch"]);
    expect(one.name).toBe("dispatch");
    const allBut = parseFidelity("artifact", "-dispatch, -tick");
    expect(allBut.on.size).toBe(ARTIFACT_MECHANISMS.length - 2);
    expect(allBut.on.has("dispatch")).toBe(false);
    expect(() => parseFidelity("native", "dispatch,warp")).toThrow(/unknown mechanism "warp"/);
    expect(() => parseFidelity("sideways")).toThrow(/native or artifact/);
  });
});

describe("the controller's EWMA (pandas ewm, half-life 3 ticks, adjust=False, last 20 samples)", () => {
  it("starts from the first kept sample and weighs each new one by 1 − 2^(−1/3)", () => {
    const e = new WindowedEwma();
    expect(e.value).toBe(0);
    expect(e.push(10)).toBe(10);
    expect(e.push(0)).toBeCloseTo(10 * (1 - ALPHA), 12);
    // Three ticks of half-life: the old value has halved.
    e.push(0);
    expect(e.push(0)).toBeCloseTo(5, 12);
  });

  it("forgets what falls out of its 20-sample window: the oldest kept sample restarts the average", () => {
    const e = new WindowedEwma();
    e.push(1_000);
    for (let i = 0; i < 19; i++) e.push(0);
    const before = e.value;
    expect(before).toBeGreaterThan(0);
    // The 1,000 leaves the window; what remains is zeros only.
    expect(e.push(0)).toBe(0);
  });

  it("plans with 1.05 × the in-flight count; a tick with nothing in flight changes nothing; model lists start at 0", () => {
    const t = new SignalTracker(["a", "b"]);
    expect(t.tick({ inFlight: 0, arrivals: { a: 5 }, queued: { a: 3 } }).demand).toBe(0);
    const s = t.tick({ inFlight: 20, arrivals: { a: 8 }, queued: { a: 4 } });
    expect(s.demand).toBeCloseTo(21, 12);
    // [0, 8] through the EWMA: 8 × alpha.
    expect(s.arrivals.a).toBeCloseTo(8 * ALPHA, 12);
    expect(s.queueLength.a).toBeCloseTo(4 * ALPHA, 12);
    expect(s.arrivals.b).toBe(0);
    // A count, not a rate: 20 queries in flight read as 21 whatever the arrival rate.
    expect(t.tick({ inFlight: 0, arrivals: {}, queued: {} })).toEqual(s);
  });
});

describe("ControllerLedger", () => {
  it("counts a query in flight until the tick that learns of its answer, and a drop until the tick that notices it", () => {
    const l = new ControllerLedger(["m"], 0);
    l.start(1, 500); // answered at 1,200: known at 2,000
    l.start(2, 600); // never answered: dropped at 600 + 12,000, noticed at 13,000
    l.arrival("m");
    l.arrival("m");
    l.tick(1_000, { m: 1 }, null);
    expect(l.signals.demand).toBeCloseTo(2 * 1.05, 12);
    l.end(1, 1_200, "succeed");
    l.end(2, 12_600, "drop", true);
    l.tick(2_000, { m: 0 }, null);
    // The answered one is gone at 2,000; the dropped one still counts.
    const rows = l.rows;
    expect(rows[1]).toMatchObject({ atMs: 2_000, succeed: 1, total: 1 });
    for (let t = 3_000; t <= 13_000; t += 1_000) l.tick(t, {}, null);
    const at13 = l.rows.find((r) => r.atMs === 13_000)!;
    expect(at13).toMatchObject({ drop: 1, total: 1 });
    expect(l.unresolved).toBe(0);
    // Rows carry the queries taken in per model since the last row.
    expect(l.rows[0].arrivals).toEqual([2]);
    expect(l.rows[1].arrivals).toEqual([0]);
  });

  it("writes no row before the first tick that sees demand", () => {
    const l = new ControllerLedger(["m"], -3_000);
    l.tick(-3_000, {}, null);
    l.tick(-2_000, {}, null);
    expect(l.rows).toHaveLength(0);
    l.start(1, -1_500);
    l.tick(-1_000, {}, null);
    expect(l.rows.map((r) => r.atMs)).toEqual([-1_000]);
    // An answer past the SLO is a timeout, known at the next tick.
    l.end(1, -400, "timeout");
    l.tick(0, {}, null);
    expect(l.rows[1]).toMatchObject({ timeout: 1, total: 1 });
  });
});
