/**
 * hadis-plus's deadline-aware admission in the live router, against a real nats-server and the
 * services (profile workers at time scale 0.05: sd3.5-medium ~650 ms, sd3.5-large ~1,350 ms): with
 * time for the whole cascade a request runs it; with time for the heavy model alone a light-routed
 * prompt goes straight to it; with time for the light model only, a rejected light image, and a
 * hard prompt's light image, are served marked `no_time_for_heavy`. Every reply under hadis-plus
 * carries the choice and the estimate it was made on.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { generateCommand } from "../../services/cli/generate.ts";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, type WorkItem } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";
import { DEFAULT_WORK_QUEUE, WorkQueue } from "../../services/nats/work-queue.ts";

let t: TestSystem;
beforeAll(async () => {
  // The reference scorer (the helper's default), so that the routes of reference prompts are known;
  // one plan for the whole test (no tick after the first), so that they stay known.
  t = await startTestSystem({ policy: "hadis-plus", workers: 4, timeScale: 0.05, tickMs: 600_000 });
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

describe("hadis-plus's admission in the live router", () => {
  it("runs the cascade, skips the light stage, or serves the light image marked, by the time left against the path ahead", async () => {
    const plan = t.system.manager!.plans.current!;
    expect(plan.policy).toBe("hadis-plus");
    expect(plan.pair.light).not.toBe(plan.pair.heavy);
    const prompts = promptsByRoute(plan.pair.light, plan.routerThreshold, plan.discThreshold);

    // Time for everything: the cascade, its estimate learned from the generations seen (0 before any).
    await t.client.generate({ prompt: prompts.escalated, deadlineMs: 20_000 });
    const full = await t.client.generate({ prompt: prompts.escalated, deadlineMs: 20_000 });
    expect(full.route).toBe("light->heavy");
    expect(full.admission?.choice).toBe("cascade");
    const { lightMs, heavyMs } = full.admission!;
    expect(lightMs).toBeGreaterThan(300);
    expect(heavyMs).toBeGreaterThan(lightMs);

    // Time for the heavy model alone: a light-routed prompt goes straight to it.
    const straight = await t.client.generate({ prompt: prompts.light, deadlineMs: Math.round(heavyMs + 0.5 * lightMs) });
    expect(straight.admission?.choice).toBe("heavy");
    expect(straight.route).toBe("heavy");
    expect(straight.servedBy).toBe(plan.pair.heavy);

    // Time for the light model only: the rejected light image is served, marked.
    const tight = Math.round(0.5 * (lightMs + heavyMs));
    const rejected = await t.client.generate({ prompt: prompts.escalated, deadlineMs: tight });
    expect(rejected.admission).toMatchObject({ choice: "light", heavyMs: expect.any(Number) });
    expect(rejected.admission!.heavyMs).toBeGreaterThan(rejected.admission!.leftMs);
    expect(rejected).toMatchObject({ route: "light", servedBy: plan.pair.light, fallback: "no_time_for_heavy" });
    expect(rejected.score).toBeLessThan(rejected.threshold!);
    expect(rejected.timings.totalMs).toBeLessThan(tight);

    // A hard prompt with time for the light model only: its light image, unjudged, marked.
    const hard = await t.client.generate({ prompt: prompts.heavy, deadlineMs: tight });
    expect(hard).toMatchObject({
      route: "light",
      servedBy: plan.pair.light,
      fallback: "no_time_for_heavy",
      admission: { choice: "light" },
    });
    expect(hard.score).toBeUndefined();

    // `hadis generate` says what the admission chose and on what estimate.
    const out: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => (out.push(String(chunk)), true));
    try {
      await generateCommand(prompts.heavy, { nats: t.server.url, deadlineMs: tight }, {});
    } finally {
      write.mockRestore();
    }
    expect(out.join("")).toMatch(/admission: the light image only \(\d+ ms left; estimated light \d+, judge \d+, heavy \d+ ms\)/);
    expect(out.join("")).toContain("hadis-plus's admission sent a hard prompt to the light model) (fallback no_time_for_heavy)");
  }, 60_000);

  it("races a hard prompt whose heavy image is late (work this router does not see holds the heavy workers) with the light model", async () => {
    const plan = t.system.manager!.plans.current!;
    const prompts = promptsByRoute(plan.pair.light, plan.routerThreshold, plan.discThreshold);
    // Another router's work fills the heavy model's workers for three rounds; this router's
    // estimate counts only its own, so the admission sends the hard prompt to the heavy model.
    const queue = await WorkQueue.open(t.nc, subjects(), { ...DEFAULT_WORK_QUEUE, storage: "memory" });
    const heavy = plan.models[plan.pair.heavy];
    const now = Date.now();
    for (let i = 0; i < heavy.workers * heavy.batchSize * 3; i++) {
      const item: WorkItem = {
        v: PROTOCOL_VERSION,
        requestId: `foreign-${now}-${i}`,
        stage: "heavy",
        prompt: "another router's prompt",
        seed: i,
        model: plan.pair.heavy,
        replyTo: "hadis.result.other-router",
        enqueuedAtMs: now,
        deadlineAtMs: now + 30_000,
        planEpoch: plan.epoch,
      };
      await queue.publish(plan.pair.heavy, encode(item), `${item.requestId}/heavy/${plan.pair.heavy}`);
    }
    const deadlineMs = 2_500;
    const reply = await t.client.generate({ prompt: prompts.heavy, deadlineMs });
    expect(reply.admission?.choice).toBe("heavy");
    expect(reply.admission!.heavyMs).toBeLessThanOrEqual(deadlineMs);
    expect(reply).toMatchObject({ route: "light", servedBy: plan.pair.light, fallback: "heavy_late" });
    expect(reply.timings.totalMs).toBeLessThan(deadlineMs);
  }, 60_000);
});
