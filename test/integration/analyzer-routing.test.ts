/** The router scores every prompt with the prompt analyzer, known prompt or not. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { loadPromptAnalyzer } from "../../services/lib/analyzer-files.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem({ workers: 2, scorer: "analyzer" });
});
afterAll(async () => {
  await t?.stop();
});

describe("router with the prompt analyzer", () => {
  it("reports the analyzer's score of prompts nobody has seen", async () => {
    const analyzer = loadPromptAnalyzer();
    for (const prompt of ["a red bicycle leaning against a brick wall", "two astronauts playing chess on the moon under a purple sky", "cat"]) {
      const reply = await t.client.generate({ prompt, deadlineMs: 20_000 });
      expect(reply.difficulty).toBeCloseTo(analyzer.analyzePrompt(prompt).score, 9);
    }
  });

  it("sends long, object-heavy prompts to the heavy model more often than one-word prompts", async () => {
    const hard = "an old man with a wooden cane and a small brown dog sitting on a bench next to a tall lamp post in a snowy park";
    const easy = "cat";
    const hardReply = await t.client.generate({ prompt: hard, deadlineMs: 20_000 });
    const easyReply = await t.client.generate({ prompt: easy, deadlineMs: 20_000 });
    expect(hardReply.difficulty).toBeGreaterThan(easyReply.difficulty);
    expect(hardReply.route).toBe("heavy");
    expect(easyReply.route).not.toBe("heavy");
  });
});
