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
    const span = (n: string, sv: string, st: number, d: number, p?: string): SpanRecord => ({ t, s: n, p, n, sv, k: 0, st, d, a: {} });
    // The worker's span is a grandchild of the root (under the queue stage), and arrives first.
    s.addSpans([span("execute m", "hadis-worker", 1_010, 5, "queue m"), span("route", "hadis-router", 1_000, 1, "root")]);
    s.addSpans([span("queue m", "hadis-router", 1_002, 8, "root"), { ...span("root", "hadis-router", 999, 30), n: "hadis.generate", a: { "hadis.outcome": "ok" } }]);
    expect(s.recent()[0].stages.map((x) => [x.n, x.o])).toEqual([["route", 1], ["queue m", 3], ["execute m", 11]]);
    expect(s.trace(t).map((x) => x.n)).toEqual(["hadis.generate", "route", "queue m", "execute m"]);
  });

  it("shows each request of a caller's trace with its own stages only, and keeps a bounded number of spans a trace", () => {
    const s = new DashboardState({ traces: 10, spansPerTrace: 20, requests: 300, seconds: 600, workerSilenceMs: 10_000 });
    const t = "d".repeat(32);
    // A caller that wraps a whole load test in one span: every request continues the same trace.
    for (let i = 0; i < 15; i++) {
      const root = `r${i}`;
      s.addSpans([
        { t, s: `route${i}`, p: root, n: "route", sv: "hadis-router", k: 0, st: i * 100 + 1, d: 1, a: {} },
        { t, s: root, p: "caller", n: "hadis.generate", sv: "hadis-router", k: 1, st: i * 100, d: 10, a: { "hadis.outcome": "ok" } },
      ]);
    }
    expect(s.recent()).toHaveLength(15);
    expect(s.recent()[14].stages.map((x) => x.n)).toEqual(["route"]); // the first request: one stage, not fifteen
    expect(s.trace(t)).toHaveLength(20);
    expect(s.summary(10_000).spansDropped).toBe(10);
    expect(s.recent()[0].stages).toEqual([]); // the last request's stage did not fit
  });

  it("serves a bounded series whatever the query asks for", () => {
    const s = new DashboardState();
    for (const n of [Infinity, 1e16, 3e6]) expect(s.series(1_700_000_000_000, n)).toHaveLength(600);
    expect(s.series(1_700_000_000_000, Number("abc"))).toHaveLength(0);
    expect(s.series(1_700_000_000_000, -5)).toHaveLength(0);
    expect(s.series(1_700_000_000_000, 2.5)).toHaveLength(2);
  });

  it("forgets workers that went silent, with their swap counts", () => {
    const s = new DashboardState();
    const beat = (workerId: string, swapsTotal: number) =>
      ({ v: 1, workerId, model: "m", state: "serving", queueDepth: 0, batchSize: 1, swapsTotal, sentAtMs: 0 }) as unknown as Parameters<DashboardState["addHeartbeat"]>[0];
    expect(s.addHeartbeat(beat("w1", 3), 0)).toBe(0);
    expect(s.addHeartbeat(beat("w1", 5), 1_000)).toBe(2);
    // w1 goes silent; a new worker's heartbeats prune it without anyone polling the state.
    s.addHeartbeat(beat("w2", 0), 20_000);
    expect(s.liveWorkers(20_000).map((w) => w.workerId)).toEqual(["w2"]);
    // Back after its silence, w1's earlier count is forgotten: its first heartbeat counts no swaps.
    expect(s.addHeartbeat(beat("w1", 9), 21_000)).toBe(0);
  });
});
