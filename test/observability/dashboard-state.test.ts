import { describe, expect, it } from "vitest";
import { DashboardState } from "../../services/dashboard/state.ts";
import type { SpanRecord } from "../../services/lib/telemetry.ts";

const stats = (arrivals: number, served: number, answered: number, violations: number) => ({
  v: 1 as const,
  routerId: "r1",
  arrivals,
  intervalMs: 1_000,
  inFlight: 0,
  served,
  answered,
  violations,
  sentAtMs: 0,
});

describe("DashboardState", () => {
  it("takes demand, served and SLO outcomes from the routers' reports, not from the sampled traces", () => {
    const s = new DashboardState();
    const t0 = 1_700_000_000_000;
    for (let i = 0; i < 10; i++) s.addRouterStats(stats(100, 98, 99, i === 0 ? 9 : 0), t0 + i * 1_000);
    // Two traced requests only: the headline figures must not follow them.
    const root = (t: string, met: boolean): SpanRecord => ({ t, s: `${t}01`, n: "hadis.generate", sv: "hadis-router", k: 1, st: t0 + 500, d: 40, a: { "hadis.outcome": "ok", "hadis.slo_met": met, "hadis.route": "light" } });
    s.addSpans([root("a".repeat(32), true), root("b".repeat(32), false)]);
    const sm = s.summary(t0 + 10_000); // the 10 s window ends with the last whole second
    expect(sm.demandQps).toBe(100);
    expect(sm.servedQps).toBe(98);
    expect(sm.sloViolationRatio).toBeCloseTo(9 / 990, 6);
    expect(s.recent()).toHaveLength(2);
  });

  it("groups a trace's stage spans under its request, by start time", () => {
    const s = new DashboardState();
    const t = "c".repeat(32);
    const span = (n: string, sv: string, st: number, d: number): SpanRecord => ({ t, s: n, n, sv, k: 0, st, d, a: {} });
    s.addSpans([span("execute m", "hadis-worker", 1_010, 5), span("route", "hadis-router", 1_000, 1)]);
    s.addSpans([{ ...span("hadis.generate", "hadis-router", 999, 30), a: { "hadis.outcome": "ok" } }]);
    expect(s.recent()[0].stages.map((x) => [x.n, x.o])).toEqual([["route", 1], ["execute m", 11]]);
    expect(s.trace(t).map((x) => x.n)).toEqual(["hadis.generate", "route", "execute m"]);
  });
});
