/** Regression guard: agreement with the reference features over the 5,000 reference prompts, and the CLI's output. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { pearson, spearman } from "../../../actors/analyzer/agreement.ts";
import { featureVector, scoreVector } from "../../../actors/analyzer/score-model.ts";
import { FEATURE_NAMES } from "../../../actors/profile/reference.ts";
import { analyzeCommand } from "../../../services/cli/analyze.ts";
import { loadPromptAnalyzer } from "../../../services/files/analyzer-files.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

describe("agreement with the reference router", () => {
  const { prompts, features } = loadProfiles().reference;
  const analyzer = loadPromptAnalyzer();
  const ours = prompts.map((p) => featureVector(analyzer.analyzePrompt(p).features));

  it("ranks prompts like the reference score (Spearman ≥ 0.95)", () => {
    const a = ours.map((v) => scoreVector(v, analyzer.scoreModel));
    const b = features.map((v) => scoreVector(v, analyzer.scoreModel));
    expect(spearman(a, b)).toBeGreaterThan(0.95);
  });

  it("every weighted feature but named entities correlates ≥ 0.85", () => {
    FEATURE_NAMES.forEach((name, k) => {
      if (name === "namedEntities") return; // weight 0.01; spaCy NER on lower-case text has no wink counterpart
      expect(
        pearson(
          ours.map((v) => v[k]),
          features.map((v) => v[k]),
        ),
        name,
      ).toBeGreaterThan(0.85);
    });
  });
});

describe("analyzeCommand", () => {
  afterEach(() => vi.restoreAllMocks());

  it("--json prints one object with the eight features and a finite score", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((s: string) => void lines.push(s));
    await analyzeCommand({ prompt: "a red ball sits in the grass on a green field", json: true });
    expect(lines).toHaveLength(1);
    const out = JSON.parse(lines[0]);
    expect(Object.keys(out.features)).toEqual([...FEATURE_NAMES]);
    expect(out.features.numObjects).toBe(3);
    expect(Number.isFinite(out.score)).toBe(true);
  });

  it("rejects a call with neither --prompt nor --file", async () => {
    await expect(analyzeCommand({})).rejects.toThrow(/--prompt/);
  });
});
