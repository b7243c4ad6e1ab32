/** The router scores every prompt with the prompt analyzer, known prompt or not. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { loadPromptAnalyzer } from "../../services/files/analyzer-files.ts";
import { copyFileSync, cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

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
    for (const prompt of [
      "a red bicycle leaning against a brick wall",
      "two astronauts playing chess on the moon under a purple sky",
      "cat",
    ]) {
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

describe("router with a profiles folder of its own", () => {
  it("scores with that folder's analyzer weights, not the repository's", async () => {
    // A copy of the profiles whose router weights are the learned ones.
    const dir = mkdtempSync(join(tmpdir(), "hadis-profiles-"));
    cpSync("profiles", dir, { recursive: true });
    copyFileSync(join(dir, "analyzer/router-weights-learned.json"), join(dir, "analyzer/router-weights.json"));
    const own = await startTestSystem({ workers: 2, scorer: "analyzer", profilesDir: dir });
    try {
      const prompt = "two astronauts playing chess on the moon under a purple sky";
      const reply = await own.client.generate({ prompt, deadlineMs: 20_000 });
      const learned = loadPromptAnalyzer({ profilesDir: dir }).analyzePrompt(prompt).score;
      expect(learned).not.toBeCloseTo(loadPromptAnalyzer().analyzePrompt(prompt).score, 3);
      expect(reply.difficulty).toBeCloseTo(learned, 9);
    } finally {
      await own.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
