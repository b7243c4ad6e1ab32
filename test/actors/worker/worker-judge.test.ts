import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { JudgeBackend } from "../../../actors/worker/backend.ts";
import type { WorkerJudgement } from "../../../actors/worker/ports.ts";
import type { WorkItem } from "../../../contracts/messages.ts";
import { item, plan, settled, setup, until } from "../../helpers/worker-fakes.ts";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A worker on model "a" whose backend takes 20 ms a batch, holding `judge` (scores by prompt: "good" 0.9, else 0.1; 5 ms a call). */
function judgingWorker(judge: Partial<JudgeBackend> | null = {}) {
  const judged: WorkerJudgement[] = [];
  const scored: number[] = [];
  const judgeBackend: JudgeBackend | null = judge && {
    kind: "fake",
    score: async (batch) => {
      scored.push(batch.length);
      await new Promise((r) => setTimeout(r, 5));
      return batch.map((b) => (b.prompt === "good" ? 0.9 : 0.1));
    },
    thresholdFor: (_model, share) => share / 2,
    close: async () => undefined,
    ...judge,
  };
  const { agent, queue, results } = setup(20, 10, undefined, {
    ...(judgeBackend ? { judge: judgeBackend } : {}),
    observer: { started: () => ({ ended: () => undefined, judged: (j) => void judged.push(j) }) },
  });
  return { agent, queue, results, judged, scored };
}

const wanting = (id: string, prompt: string, over: Partial<WorkItem> = {}): WorkItem => ({
  ...item("a", id, Date.now() + 60_000, prompt),
  wantsVerdict: true,
  ...over,
});

/** Plan epoch 1 escalating 40% of light images: the fake judge's threshold is 0.2. */
const plan40 = () => ({ ...plan(1, "a", 4), discThreshold: 0.4 });

describe("WorkerAgent judging where the image is", () => {
  it("judges the light images that ask for a verdict right after their batch, in one call, and sends each verdict with its result", async () => {
    const { agent, queue, results, judged, scored } = judgingWorker();
    queue.push("a", wanting("r1", "good"));
    queue.push("a", wanting("r2", "bad"));
    queue.push("a", item("a", "r3")); // asks for none
    agent.applyPlan(plan40());
    agent.start();
    await until(() => results.length === 3);
    const byId = new Map(results.map((r) => [r.requestId, r]));
    expect(byId.get("r1")).toMatchObject({ ok: true, verdict: { score: 0.9, threshold: 0.2, accept: true, planEpoch: 1 } });
    expect(byId.get("r2")).toMatchObject({ ok: true, verdict: { score: 0.1, threshold: 0.2, accept: false, planEpoch: 1 } });
    expect(byId.get("r3")).not.toHaveProperty("verdict");
    expect(scored).toEqual([2]);
    // The judging is timed apart from the generation.
    const r1 = byId.get("r1")!;
    expect(r1.ok && r1.verdict!.judgeMs).toBeGreaterThanOrEqual(5);
    expect(r1.ok && r1.execMs).toBeLessThan(25);
    expect(judged).toHaveLength(1);
    expect(judged[0].entries.map((e) => e.item.requestId)).toEqual(["r1", "r2"]);
    await settled(agent.stop());
  });

  it("sends no verdict for an item decided under a newer plan than the worker's, nor for a heavy image", async () => {
    const { agent, queue, results, scored } = judgingWorker();
    queue.push("a", wanting("r1", "good", { planEpoch: 2 }));
    queue.push("a", wanting("r2", "good", { stage: "heavy" }));
    agent.applyPlan(plan40());
    agent.start();
    await until(() => results.length === 2);
    expect(results.every((r) => r.ok && r.verdict === undefined)).toBe(true);
    expect(scored).toEqual([]);
    await settled(agent.stop());
  });

  it("serves the images without verdicts when its judge fails (the router asks the discriminator), and when it holds none", async () => {
    const failing = judgingWorker({
      score: async () => {
        throw new Error("judge thread gone");
      },
    });
    for (const w of [failing, judgingWorker(null)]) {
      w.queue.push("a", wanting("r1", "good"));
      w.agent.applyPlan(plan40());
      w.agent.start();
      await until(() => w.results.length === 1);
      expect(w.results[0]).toMatchObject({ ok: true });
      expect(w.results[0]).not.toHaveProperty("verdict");
      await settled(w.agent.stop());
    }
  });
});
