import { describe, expect, it } from "vitest";
import { DashboardState } from "../../services/dashboard/state.ts";
import type { SpanRecord } from "../../services/telemetry/tracing.ts";

/** A 16-hex span id per name (the sink only carries ids the tracer made: hex, 16 digits). */
const ids = new Map<string, string>();
const id = (name: string) => ids.get(name) ?? ids.set(name, (ids.size + 1).toString(16).padStart(16, "0")).get(name)!;

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
    // Each report covers the second before it: these cover the ten seconds from t0.
    for (let i = 0; i < 10; i++) s.addRouterStats(stats(100, 98, 99, i === 0 ? 9 : 0), t0 + (i + 1) * 1_000);
    // Two traced requests only: the headline figures must not follow them.
    const root = (t: string, met: boolean): SpanRecord => ({
      t,
      s: id(t),
      n: "hadis.generate",
      sv: "hadis-router",
      k: 1,
      st: t0 + 500,
      d: 40,
      a: { "hadis.outcome": "ok", "hadis.slo_met": met, "hadis.route": "light" },
    });
    s.addSpans([root("a".repeat(32), true), root("b".repeat(32), false)]);
    const sm = s.summary(t0 + 10_000); // the 10 s window ends with the last whole second
    expect(sm.demandQps).toBe(100);
    expect(sm.servedQps).toBe(98);
    expect(sm.sloViolationRatio).toBeCloseTo(9 / 990, 6);
    expect(s.recent()).toHaveLength(2);
    expect(s.recent().map((r) => r.fallback)).toEqual([undefined, undefined]);
    // A light image served in place of more says why, from the root span.
    s.addSpans([{ ...root("c".repeat(32), true), a: { "hadis.outcome": "ok", "hadis.route": "light", "hadis.fallback": "judge_failed" } }]);
    expect(s.recent()[0].fallback).toBe("judge_failed");
  });

  it("spreads each report over the interval it covers: a steady load reads steady when reports land either side of a second's edge", () => {
    const s = new DashboardState();
    const t0 = 1_700_000_000_000;
    // 100 requests a second, reported every second, landing between x.993 and x.007.
    const jitter = [-7, 5, -3, 7, -6, 2, 6, -5, 4, -1, 3];
    for (let i = 0; i < jitter.length; i++) s.addRouterStats(stats(100, 100, 100, 0), t0 + i * 1_000 + jitter[i]);
    const perSecond = s.series(t0 + 10_000, 9).map((b) => Math.round(b.arrivals));
    for (const n of perSecond) expect(n).toBeGreaterThanOrEqual(98);
    for (const n of perSecond) expect(n).toBeLessThanOrEqual(102);
    expect(s.summary(t0 + 10_000, 5).demandQps).toBeCloseTo(100, 0);
    // A report over an hour (the longest a router may send) keeps its rate: 3,600 in an hour is 1 a second.
    const hour = new DashboardState();
    hour.addRouterStats({ ...stats(3_600, 3_600, 3_600, 0), intervalMs: 3_600_000 }, t0);
    expect(hour.summary(t0, 10).demandQps).toBeCloseTo(1, 6);
  });

  it("keeps at most traceBytes of one trace's spans, and still lists its requests", () => {
    const s = new DashboardState({ traceBytes: 4_096 });
    const t = "e".repeat(32);
    const big = "x".repeat(1_000);
    for (let i = 0; i < 10; i++)
      s.addSpans([{ t, s: id(`big${i}`), p: id("bigroot"), n: "route", sv: "hadis-router", k: 0, st: i, d: 1, a: { note: big } }]);
    s.addSpans([
      { t, s: id("bigroot"), n: "hadis.generate", sv: "hadis-router", k: 1, st: 0, d: 10, a: { "hadis.outcome": "ok", note: big } },
    ]);
    expect(s.trace(t).length).toBeLessThan(5);
    expect(s.summary(Date.now()).spansDropped).toBeGreaterThan(5);
    expect(s.recent()[0].traceId).toBe(t);
  });

  it("groups a trace's stage spans under its request, by start time", () => {
    const s = new DashboardState();
    const t = "c".repeat(32);
    const span = (n: string, sv: string, st: number, d: number, p?: string): SpanRecord => ({
      t,
      s: id(n),
      ...(p ? { p: id(p) } : {}),
      n,
      sv,
      k: 0,
      st,
      d,
      a: {},
    });
    // The worker's span is a grandchild of the root (under the queue stage), and arrives first.
    s.addSpans([span("execute m", "hadis-worker", 1_010, 5, "queue m"), span("route", "hadis-router", 1_000, 1, "root")]);
    s.addSpans([
      span("queue m", "hadis-router", 1_002, 8, "root"),
      { ...span("root", "hadis-router", 999, 30), n: "hadis.generate", a: { "hadis.outcome": "ok" } },
    ]);
    expect(s.recent()[0].stages.map((x) => [x.n, x.o])).toEqual([
      ["route", 1],
      ["queue m", 3],
      ["execute m", 11],
    ]);
    expect(s.trace(t).map((x) => x.n)).toEqual(["hadis.generate", "route", "queue m", "execute m"]);
  });

  it("finds a request by its request id: of a keyed generation and its deduplicated retry (listed later), the generation", () => {
    const s = new DashboardState();
    const gen = "d".repeat(32);
    const retry = "e".repeat(32);
    const root = (t: string, name: string): SpanRecord => ({
      t,
      s: id(name),
      n: "hadis.generate",
      sv: "hadis-router",
      k: 0,
      st: 1_000,
      d: 30,
      a: { "hadis.outcome": "ok", "hadis.request_id": "k-abc" },
    });
    s.addSpans([
      root(gen, "gen-root"),
      { t: gen, s: id("gen-route"), p: id("gen-root"), n: "route", sv: "hadis-router", k: 0, st: 1_001, d: 1, a: {} },
    ]);
    s.addSpans([root(retry, "retry-root")]);
    expect(s.recent()[0].traceId).toBe(retry);
    expect(s.request("k-abc")?.traceId).toBe(gen);
    expect(s.request("k-none")).toBeUndefined();
  });

  it("shows each request of a caller's trace with its own stages only, and keeps a bounded number of spans a trace", () => {
    const s = new DashboardState({ traces: 10, spansPerTrace: 20, requests: 300, seconds: 600, workerSilenceMs: 10_000 });
    const t = "d".repeat(32);
    // A caller that wraps a whole load test in one span: every request continues the same trace.
    for (let i = 0; i < 15; i++) {
      const root = id(`r${i}`);
      s.addSpans([
        { t, s: id(`route${i}`), p: root, n: "route", sv: "hadis-router", k: 0, st: i * 100 + 1, d: 1, a: {} },
        { t, s: root, p: id("caller"), n: "hadis.generate", sv: "hadis-router", k: 1, st: i * 100, d: 10, a: { "hadis.outcome": "ok" } },
      ]);
    }
    expect(s.recent()).toHaveLength(15);
    expect(s.recent()[14].stages.map((x) => x.n)).toEqual(["route"]); // the first request: one stage, not fifteen
    expect(s.trace(t)).toHaveLength(20);
    expect(s.summary(10_000).spansDropped).toBe(10);
    expect(s.recent()[0].stages).toEqual([]); // the last request's stage did not fit
  });

  it("counts what is not a span batch or a span record, and keeps none of it", () => {
    const s = new DashboardState();
    const t = "e".repeat(32);
    const good: SpanRecord = {
      t,
      s: id("g-root"),
      n: "hadis.generate",
      sv: "hadis-router",
      k: 1,
      st: 1_000,
      d: 5,
      a: { "hadis.outcome": "ok" },
    };
    for (const batch of [null, "spans", 42, { t }]) s.addSpans(batch);
    s.addSpans([
      good,
      { ...good, s: "not-hex-at-all!!" },
      { ...good, s: id("self"), p: id("self") }, // its own parent
      { ...good, s: id("nan"), st: Number.NaN },
      { ...good, s: id("neg"), d: -1 },
      { ...good, s: id("attrs"), a: [] as never },
      { ...good, s: id("err"), e: 2 as never },
      { ...good, s: id("links"), l: [{ t: "x", s: "y" }] },
      { ...good, t: "<img src=x onerror=alert(1)>" },
      null,
    ]);
    expect(s.summary(0).spansMalformed).toBe(4 + 9);
    expect(s.summary(0).spansReceived).toBe(1);
    expect(s.recent().map((r) => r.spanId)).toEqual([good.s]);
  });

  it("walks a trace whose ids loop (a publisher that reuses ids) without looping", () => {
    const s = new DashboardState();
    const t = "f".repeat(32);
    const root = id("loop-root");
    const a = id("loop-a");
    s.addSpans([
      { t, s: root, n: "hadis.generate", sv: "hadis-router", k: 1, st: 0, d: 10, a: { "hadis.outcome": "ok" } },
      { t, s: a, p: root, n: "route", sv: "hadis-router", k: 0, st: 1, d: 1, a: {} },
      // Another record claiming the root's id, under the root's child: root → a → root → …
      { t, s: root, p: a, n: "reply", sv: "hadis-router", k: 0, st: 2, d: 1, a: {} },
    ]);
    expect(s.recent()[0].stages.map((x) => x.n)).toEqual(["route"]);
  });

  it("gives each stage span the stage it serves, from its own attribute or its parent's", () => {
    const s = new DashboardState();
    const t = "1".repeat(32);
    const root = id("st-root");
    s.addSpans([
      {
        t,
        s: root,
        n: "hadis.generate",
        sv: "hadis-router",
        k: 1,
        st: 0,
        d: 100,
        a: { "hadis.outcome": "ok", "hadis.route": "escalated" },
      },
      { t, s: id("st-light"), p: root, n: "light m1", sv: "hadis-router", k: 3, st: 1, d: 20, a: { "hadis.stage": "light" } },
      { t, s: id("st-exec1"), p: id("st-light"), n: "execute m1", sv: "hadis-worker", k: 4, st: 5, d: 10, a: {} },
      { t, s: id("st-heavy"), p: root, n: "heavy m2", sv: "hadis-router", k: 3, st: 30, d: 60, a: { "hadis.stage": "heavy" } },
      // The heavy stage ran on m1 (a moved item): the plan's pair cannot tell, the parent can.
      { t, s: id("st-exec2"), p: id("st-heavy"), n: "execute m1", sv: "hadis-worker", k: 4, st: 40, d: 40, a: {} },
      { t, s: id("st-judge"), p: root, n: "judge", sv: "hadis-discriminator", k: 1, st: 22, d: 3, a: {} },
    ]);
    expect(s.recent()[0].stages.map((x) => [x.n, x.stage])).toEqual([
      ["light m1", "light"],
      ["execute m1", "light"],
      ["judge", undefined],
      ["heavy m2", "heavy"],
      ["execute m1", "heavy"],
    ]);
  });

  it("evicts the trace least recently added to, and fills in late stage spans of any listed request", () => {
    const s = new DashboardState({ traces: 2, spansPerTrace: 512, requests: 300, seconds: 600, workerSilenceMs: 10_000 });
    const trace = (c: string) => c.repeat(32);
    const root = (c: string, i: number): SpanRecord => ({
      t: trace(c),
      s: id(`ev-root-${c}-${i}`),
      n: "hadis.generate",
      sv: "hadis-router",
      k: 1,
      st: i,
      d: 1,
      a: { "hadis.outcome": "ok" },
    });
    // A slow request's trace (2) starts first; its early span must outlive later, finished traces.
    s.addSpans([{ t: trace("2"), s: id("ev-route-2"), p: id("ev-root-2-0"), n: "route", sv: "hadis-router", k: 0, st: 0, d: 1, a: {} }]);
    s.addSpans([root("3", 1)]);
    s.addSpans([{ t: trace("2"), s: id("ev-light-2"), p: id("ev-root-2-0"), n: "light m", sv: "hadis-router", k: 3, st: 2, d: 50, a: {} }]);
    s.addSpans([root("4", 3)]); // evicts trace 3, the least recently added to, not trace 2
    expect(s.trace(trace("3"))).toEqual([]);
    expect(s.trace(trace("2")).map((x) => x.n)).toEqual(["route", "light m"]);
    s.addSpans([root("2", 0)]);
    // Sixty requests later (trace "5" holds them all), a late stage span of the slow request still shows on it.
    for (let i = 0; i < 60; i++) s.addSpans([root("5", 100 + i)]);
    s.addSpans([{ t: trace("2"), s: id("ev-reply-2"), p: id("ev-root-2-0"), n: "reply", sv: "hadis-router", k: 0, st: 60, d: 1, a: {} }]);
    expect(
      s
        .recent(100)
        .find((r) => r.traceId === trace("2"))!
        .stages.map((x) => x.n),
    ).toEqual(["route", "light m", "reply"]);
  });

  it("serves a bounded series whatever the query asks for", () => {
    const s = new DashboardState();
    for (const n of [Infinity, 1e16, 3e6]) expect(s.series(1_700_000_000_000, n)).toHaveLength(600);
    expect(s.series(1_700_000_000_000, Number("abc"))).toHaveLength(0);
    expect(s.series(1_700_000_000_000, -5)).toHaveLength(0);
    expect(s.series(1_700_000_000_000, 2.5)).toHaveLength(2);
  });

  it("shows a worker silent 3 s as lost, and forgets one silent a minute, with its swap count", () => {
    const s = new DashboardState();
    const beat = (workerId: string, swapsTotal: number) =>
      ({ v: 1, workerId, model: "m", state: "serving", queueDepth: 0, batchSize: 1, swapsTotal, sentAtMs: 0 }) as unknown as Parameters<
        DashboardState["addHeartbeat"]
      >[0];
    expect(s.addHeartbeat(beat("w1", 3), 0)).toBe(0);
    expect(s.addHeartbeat(beat("w1", 5), 1_000)).toBe(2);
    // Silent 3 s, w1 is shown lost (as the resource manager counts it), with the state it last said.
    s.addHeartbeat(beat("w2", 0), 4_100);
    expect(s.liveWorkers(4_100).map((w) => [w.workerId, w.state, w.lastState])).toEqual([
      ["w1", "lost", "serving"],
      ["w2", "serving", undefined],
    ]);
    // Silent a minute, it is forgotten: a new worker's heartbeats prune it without anyone polling the state.
    s.addHeartbeat(beat("w2", 0), 62_000);
    expect(s.liveWorkers(62_000).map((w) => w.workerId)).toEqual(["w2"]);
    // Back after its silence, w1's earlier count is forgotten: its first heartbeat counts no swaps.
    expect(s.addHeartbeat(beat("w1", 9), 63_000)).toBe(0);
  });

  it("keeps a bounded copy of what the feed sends: strings cut, bytes, BigInt and objects dropped, no throw on odd values", () => {
    const s = new DashboardState();
    const huge = "x".repeat(5_000_000);
    const bytes = new Uint8Array(1_000_000);
    const trickster = { toString: 1 };
    s.addSpans([
      {
        t: "e".repeat(32),
        s: id("big"),
        n: huge,
        sv: huge,
        k: 1,
        st: 1,
        d: 1,
        e: huge,
        a: {
          long: huge,
          blob: bytes,
          big: 10n,
          nested: { a: 1 },
          list: Array.from({ length: 1_000 }, () => huge),
          odd: trickster,
          [huge]: 1,
        },
      },
      {
        t: "f".repeat(32),
        s: id("root-odd"),
        n: "hadis.generate",
        sv: "hadis-router",
        k: 1,
        st: 2,
        d: 1,
        a: { "hadis.models": [trickster, "sd35-medium"], "hadis.outcome": "ok" },
      },
    ]);
    const [kept] = s.trace("e".repeat(32));
    expect(kept.n.length).toBeLessThanOrEqual(257);
    expect(kept.sv.length).toBeLessThanOrEqual(129);
    expect(kept.e!.length).toBeLessThanOrEqual(1_025);
    expect(Object.keys(kept.a).sort()).toEqual(["list", "long"]);
    expect((kept.a.long as string).length).toBeLessThanOrEqual(1_025);
    expect(kept.a.list).toHaveLength(16);
    expect(JSON.stringify(s.trace("e".repeat(32))).length).toBeLessThan(40_000);
    // The root with an odd model is listed with the models that are text; the batch was not cut short.
    expect(s.recent()[0].models).toEqual(["sd35-medium"]);
    expect(s.summary(0).spansReceived).toBe(2);
  });

  it("holds spans within a byte budget, the oldest traces first, and a bounded number of workers", () => {
    const s = new DashboardState({ spanBytes: 200_000, workers: 3 });
    const trace = (i: number) => i.toString(16).padStart(32, "0");
    for (let i = 1; i <= 100; i++)
      s.addSpans([{ t: trace(i), s: id(`s${i}`), n: "execute m", sv: "hadis-worker", k: 0, st: i, d: 1, a: { note: "y".repeat(1_000) } }]);
    // About 2.3 kB a span: the newest ~80 traces fit, the oldest went.
    expect(s.trace(trace(1))).toHaveLength(0);
    expect(s.trace(trace(100))).toHaveLength(1);
    const held = Array.from({ length: 100 }, (_, i) => s.trace(trace(i + 1)).length).reduce((a, b) => a + b, 0);
    expect(held).toBeGreaterThan(50);
    expect(held).toBeLessThan(100);
    const beat = (workerId: string) => ({
      v: 1 as const,
      workerId,
      backend: "profile",
      model: null,
      state: "idle" as const,
      batchSize: 1,
      inFlight: 0,
      servedTotal: 0,
      swapsTotal: 0,
      planEpoch: 0,
      sentAtMs: 0,
    });
    for (const w of ["w1", "w2", "w3", "w4", "w1"]) s.addHeartbeat(beat(w), 1_000);
    expect(s.liveWorkers(1_000).map((w) => w.workerId)).toEqual(["w1", "w3", "w4"]);
  });
});
