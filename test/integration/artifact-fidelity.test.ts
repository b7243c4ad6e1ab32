/**
 * The artifact fidelity live, against a real nats-server: the manager plans with the artifact's
 * allocator and stamps its mechanisms on the plan, and every service follows the plan in force
 * (routers dispatch to a random worker's own queue, workers pull their own queues).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { ARTIFACT, ARTIFACT_MECHANISMS } from "../../actors/artifact/mechanisms.ts";
import { decode } from "../../contracts/envelope.ts";
import { RouterStatsSchema, type RouterStats } from "../../contracts/messages.ts";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

describe("the artifact fidelity on a live system", () => {
  let t: TestSystem;
  beforeAll(async () => {
    // Time scale 0.01: SLO 600 ms, sd3.5-large 270 ms an image; every plan every 0.5 s (50 trace-s).
    t = await startTestSystem({ policy: "clipper-light", fidelity: ARTIFACT, timeScale: 0.01, workers: 4 });
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
  });

  it("plans with the artifact's Clipper-Light, stamps its mechanisms, and serves through the workers' own queues", async () => {
    const plan = t.system.manager!.plans.current!;
    expect(plan.mechanisms).toEqual([...ARTIFACT_MECHANISMS]);
    expect(plan.reason).toMatch(/clipper-light \(artifact\): all 4 workers on sdxl-lightning at batch 32/);
    const stats: RouterStats[] = [];
    const sub = t.nc.subscribe(t.system.subjects.routerStatsAll, {
      callback: (_e, m) => void stats.push(decode(RouterStatsSchema, m.data, "router stats")),
    });
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) => t.client.generate({ prompt: `a red bicycle number ${i}`, deadlineMs: 1_200 })),
    );
    expect(replies).toHaveLength(12);
    // Every item went to one worker's own queue (worker-<id> consumers), none to a model's shared queue.
    const jsm = await jetstreamManager(t.nc);
    const consumers: Awaited<ReturnType<typeof jsm.consumers.info>>[] = [];
    for await (const c of jsm.consumers.list(t.system.subjects.names.workStream)) consumers.push(c);
    const delivered = (prefix: string) =>
      consumers.filter((c) => c.name.startsWith(prefix)).reduce((s, c) => s + c.delivered.stream_seq, 0);
    expect(consumers.some((c) => c.name.startsWith("worker-") && c.delivered.consumer_seq > 0)).toBe(true);
    expect(delivered("work-")).toBe(0);
    // Routers report what they queued per model: the artifact's per-model load signal.
    await new Promise((r) => setTimeout(r, 1_200));
    sub.unsubscribe();
    const enqueued = stats.flatMap((s) => Object.values(s.enqueued ?? {})).reduce((a, b) => a + b, 0);
    expect(enqueued).toBeGreaterThanOrEqual(12);
  }, 30_000);
});
