import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { recordSolve, startMetricsServer, type MetricsServer } from "../../services/telemetry/metrics.ts";
import { parsePrometheus, type Sample } from "../helpers/prometheus.ts";
import { ErrorCodes } from "../../contracts/errors.ts";
import grafana from "../../ops/grafana/hadis.json" with { type: "json" };

/** Every PromQL expression of a Grafana dashboard (panels and their targets, at any depth). */
function expressions(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(expressions);
  if (typeof node !== "object" || node === null) return [];
  return Object.entries(node).flatMap(([k, v]) => (k === "expr" && typeof v === "string" ? [v] : expressions(v)));
}

let t: TestSystem;
let server: MetricsServer;
beforeAll(async () => {
  t = await startTestSystem({ policy: "static" });
  server = await startMetricsServer(0);
});
afterAll(async () => {
  await server?.stop();
  await t?.stop();
});

describe("Prometheus /metrics", () => {
  const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

  it("counts requests by route and outcome, stage durations, workers, and the resource manager's figures", async () => {
    await Promise.all([
      ...Array.from({ length: 3 }, () => t.client.generate({ prompt: routes.light, deadlineMs: 20_000 })),
      ...Array.from({ length: 2 }, () => t.client.generate({ prompt: routes.heavy, deadlineMs: 20_000 })),
      t.client.generate({ prompt: routes.escalated, deadlineMs: 20_000 }),
    ]);
    await expect(t.client.generate({ prompt: "   ", deadlineMs: 20_000 })).rejects.toThrow();
    // A caller's own deadline far below the SLO, expired: the SLO was not asked of the system.
    await expect(t.client.generate({ prompt: routes.heavy, deadlineMs: 1 })).rejects.toThrow();
    // The resource manager records its own figures each tick; one more solve is added here so
    // the solve histogram's sum is known exactly.
    recordSolve(42);
    await t.system.manager!.tick();
    await new Promise((r) => setTimeout(r, 1_100)); // one heartbeat

    const res = await fetch(server.url);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const { samples, types } = parsePrometheus(await res.text());
    const value = (name: string, labels: Record<string, string> = {}) =>
      samples
        .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .reduce((a, s) => a + s.value, 0);

    expect(types.get("hadis_requests_total")).toBe("counter");
    expect(value("hadis_requests_total", { route: "light", outcome: "ok" })).toBe(3);
    expect(value("hadis_requests_total", { route: "heavy", outcome: "ok" })).toBe(2);
    expect(value("hadis_requests_total", { route: "light->heavy", outcome: "ok" })).toBe(1);
    expect(value("hadis_requests_total", { route: "none", outcome: "invalid_request" })).toBe(1);
    expect(types.get("hadis_slo_violations_total")).toBe("counter");
    // The six served count in the SLO; the blank prompt, refused at the edge, does not, nor does
    // the request given 1 ms (counted by its outcome only).
    expect(value("hadis_slo_requests_total")).toBe(6);
    expect(
      value("hadis_requests_total", { route: "none", outcome: "deadline_exceeded" }) +
        value("hadis_requests_total", { route: "none", outcome: "overloaded" }),
    ).toBe(1);
    expect(types.get("hadis_stage_duration_seconds")).toBe("histogram");
    expect(value("hadis_stage_duration_seconds_count", { stage: "total" })).toBe(6);
    expect(value("hadis_stage_duration_seconds_count", { stage: "judge" })).toBe(4);
    expect(value("hadis_stage_duration_seconds_count", { stage: "heavy" })).toBe(3);
    expect(value("hadis_stage_duration_seconds_bucket", { stage: "total", le: "+Inf" })).toBe(6);
    expect(value("hadis_workers", { state: "serving" })).toBe(4);
    expect(value("hadis_batch_size_count")).toBeGreaterThanOrEqual(1);
    expect(value("hadis_discriminator_verdicts_total", { verdict: "escalate" })).toBe(1);
    // The static policy solves no MILP: the only solve is the one recorded above.
    expect(value("hadis_milp_solve_seconds_sum")).toBeCloseTo(0.042);
    expect(value("hadis_plan_epoch")).toBe(t.system.manager!.plans.current!.epoch);
    expect(samples.some((x) => x.name === "hadis_demand_requests_per_second")).toBe(true);
    // The queues are empty once every request is answered.
    expect(samples.some((x) => x.name === "hadis_queue_depth" && x.labels.model === DEFAULT_STATIC.light)).toBe(true);
    expect(value("hadis_queue_depth", { model: DEFAULT_STATIC.light })).toBe(0);
    // Every HADIS metric name follows the conventions: snake case; counters end in _total, and a
    // histogram's or a gauge's unit (when it has one) is a base unit's suffix.
    const ours = [...types].filter(([name]) => name.startsWith("hadis_"));
    expect(ours.length).toBeGreaterThan(10);
    expect(ours.filter(([name]) => !/^hadis_[a-z0-9_]+$/.test(name))).toEqual([]);
    expect(ours.filter(([name, type]) => type === "counter" && !name.endsWith("_total"))).toEqual([]);
    expect(ours.filter(([name, type]) => type === "histogram" && !/_(seconds|bytes|size|ratio)$/.test(name))).toEqual([]);
    expect(ours.filter(([name]) => /_(ms|milliseconds|minutes|kb|mb|percent)(_|$)/.test(name))).toEqual([]);
  });

  it("counts a deduplicated retry as a request but not its stages again", async () => {
    const scrape = async () => parsePrometheus(await (await fetch(server.url)).text()).samples;
    const sum = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
      samples
        .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .reduce((a, s) => a + s.value, 0);
    const before = await scrape();
    const key = `k-${Date.now()}`;
    const [a, b] = await Promise.all(
      [0, 1].map(() => t.client.generate({ prompt: routes.light, idempotencyKey: key, deadlineMs: 20_000 })),
    );
    expect([a.deduplicated, b.deduplicated].filter(Boolean)).toHaveLength(1);
    const after = await scrape();
    expect(sum(after, "hadis_requests_total") - sum(before, "hadis_requests_total")).toBe(2);
    expect(
      sum(after, "hadis_stage_duration_seconds_count", { stage: "total" }) -
        sum(before, "hadis_stage_duration_seconds_count", { stage: "total" }),
    ).toBe(1);
  });

  it("has every series and label the Grafana dashboard queries, and the dashboard names only real error codes", async () => {
    const { samples } = parsePrometheus(await (await fetch(server.url)).text());
    const labelsOf = new Map<string, Set<string>>();
    for (const x of samples)
      for (const k of Object.keys(x.labels)) (labelsOf.get(x.name) ?? labelsOf.set(x.name, new Set()).get(x.name)!).add(k);
    for (const x of samples) if (!labelsOf.has(x.name)) labelsOf.set(x.name, new Set());
    const exprs = expressions(grafana);
    expect(exprs.length).toBeGreaterThanOrEqual(20);
    for (const expr of exprs) {
      const names = [...expr.matchAll(/\bhadis_[a-z0-9_]+/g)].map((m) => m[0]);
      expect(names.length, expr).toBeGreaterThan(0);
      for (const name of names) expect(labelsOf.has(name), `${name} in ${expr}`).toBe(true);
      // Labels in selectors belong to their series; labels aggregated "by" belong to one of the expression's series.
      for (const [, name, selector] of expr.matchAll(/\b(hadis_[a-z0-9_]+)\{([^}]*)\}/g)) {
        for (const [, label, op, value] of selector.matchAll(/([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)) {
          expect(labelsOf.get(name)!.has(label), `${label} on ${name} in ${expr}`).toBe(true);
          const outcomes = label === "outcome" ? value.split("|") : [];
          expect(
            outcomes.filter((code) => code !== "ok" && !(code in ErrorCodes)),
            `outcomes (${op}) in ${expr}`,
          ).toEqual([]);
        }
      }
      for (const [, by] of expr.matchAll(/\bby \(([^)]*)\)/g)) {
        for (const label of by.split(",").map((x) => x.trim())) {
          expect(
            names.some((n) => labelsOf.get(n)!.has(label)),
            `by ${label} in ${expr}`,
          ).toBe(true);
        }
      }
    }
  });
});
