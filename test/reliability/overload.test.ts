/**
 * Overload at 3x capacity: the degradation ladder instead of collapse. As demand rises the
 * planner lowers the thresholds (cheaper configurations), then serves light-only (the degraded
 * plan), then routers refuse new requests with a typed `overloaded` error and a retry-after
 * hint; in-flight work stays bounded, and everything recovers when the load falls.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { HadisError } from "../../contracts/errors.ts";

let t: TestSystem;
// 4 workers at the paper's time scale: all on sdxl-lightning at batch 32 carry about 89 qps.
beforeAll(async () => {
  t = await startTestSystem({ policy: "hadis", workers: 4, timeScale: 0.1, tickMs: 1_000, demandHalfLifeMs: 1_500, scorer: "reference" });
});
afterAll(async () => {
  await t?.stop();
});

interface Step {
  step: string;
  qps: number;
  offered: number;
  served: number;
  servedDegraded: number;
  refused: number;
  /** Refusals without a `retryAfterMs` hint (every one must have it). */
  refusedWithoutRetry: number;
  sloViolations: number;
  /** Requests that got no reply (the client's own wait ran out) or an error that is not a typed one. */
  lost: number;
  maxInFlight: number;
  plans: string;
}

async function phase(step: string, qps: number, seconds: number): Promise<Step> {
  const sloMs = 6_000;
  const out: Step = {
    step,
    qps,
    offered: 0,
    served: 0,
    servedDegraded: 0,
    refused: 0,
    refusedWithoutRetry: 0,
    sloViolations: 0,
    lost: 0,
    maxInFlight: 0,
    plans: "",
  };
  const seen = new Set<string>();
  const calls: Promise<void>[] = [];
  let inFlight = 0;
  const end = performance.now() + seconds * 1000;
  let next = performance.now();
  let i = 0;
  while (next < end) {
    next += 1000 / qps;
    const wait = next - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    out.offered++;
    inFlight++;
    out.maxInFlight = Math.max(out.maxInFlight, inFlight);
    const started = performance.now();
    calls.push(
      t.client
        .generate({ prompt: `a harbour at dusk ${i++}`, deadlineMs: sloMs })
        .then(() => {
          out.served++;
          const plan = t.system.manager!.plans.current!;
          if ((plan.degraded ?? 0) > 0) out.servedDegraded++;
          if (performance.now() - started > sloMs) out.sloViolations++;
        })
        .catch((err: HadisError) => {
          // The client says "no reply within" when its wait (past the deadline) runs out: nobody answered.
          if (!(err instanceof HadisError) || err.message.startsWith("no reply within")) out.lost++;
          if (err.code === "overloaded") {
            out.refused++;
            // (Checked after the step: an expect here would run only for refusals.)
            if (!(Number(err.details.retryAfterMs) > 0)) out.refusedWithoutRetry++;
          } else out.sloViolations++;
        })
        .finally(() => void inFlight--),
    );
    const plan = t.system.manager!.plans.current!;
    seen.add(`${plan.pair.light}→${plan.pair.heavy} r${plan.routerThreshold} d${plan.discThreshold}${plan.degraded ? " degraded" : ""}`);
  }
  await Promise.all(calls);
  out.plans = [...seen].join(" | ");
  return out;
}

describe("overload at 3x capacity", () => {
  it("climbs down the ladder and back up", async () => {
    const rssBefore = process.memoryUsage().rss;
    const steps: Step[] = [];
    steps.push(await phase("normal", 5, 6));
    steps.push(await phase("busy", 40, 6));
    steps.push(await phase("at capacity", 90, 6));
    steps.push(await phase("3x capacity", 270, 8));
    steps.push(await phase("recovered", 5, 8));
    const rssGrowthMib = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
    console.table(steps);
    console.log(`rss growth over the run: ${rssGrowthMib.toFixed(1)} MiB`);

    const [normal, , , over, recovered] = steps;
    expect(normal.refused).toBe(0);
    expect(normal.sloViolations).toBe(0);
    // At 3x, the excess is refused quickly instead of queued without bound.
    expect(over.refused).toBeGreaterThan(over.offered * 0.3);
    expect(steps.map((s) => s.refusedWithoutRetry)).toEqual([0, 0, 0, 0, 0]); // every refusal says when to retry
    expect(over.served).toBeGreaterThan(0);
    expect(over.servedDegraded).toBeGreaterThan(0);
    // Nothing is lost: every request was served, or answered with a typed error (refused, timed out).
    for (const s of steps) expect(s.lost).toBe(0);
    // Recovery: (almost) no refusals — the plan in force at the first arrivals may still be the
    // overload one — and a normal (not degraded) plan again.
    expect(recovered.refused).toBeLessThanOrEqual(Math.ceil(recovered.offered * 0.05));
    expect(recovered.served).toBeGreaterThanOrEqual(recovered.offered - recovered.refused);
    expect(t.system.manager!.plans.current!.degraded ?? 0).toBe(0);
    expect(rssGrowthMib).toBeLessThan(300);
  }, 120_000);
});
