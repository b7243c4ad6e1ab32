/** The learned scorer: the shipped model file, per-pair scoring with its fallback, determinism and speed, and the pair the route policy passes. */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseDifficultyModel, promptsHash } from "../../../actors/analyzer/difficulty-model.ts";
import { rocAuc } from "../../../actors/analyzer/calibration.ts";
import { pairQuality } from "../../../actors/analyzer/difficulty-study.ts";
import { parseDiscriminatorImageScores } from "../../../actors/profile/reference.ts";
import { FixedPercentileThreshold, type ModelPair } from "../../../actors/routing/difficulty.ts";
import { LearnedDifficultyScorer, learnedLiveThreshold } from "../../../actors/routing/learned-scorer.ts";
import { decideRoute } from "../../../actors/routing/route-policy.ts";
import { PROTOCOL_VERSION, type Plan } from "../../../contracts/messages.ts";
import { ANALYZER_PATHS, loadDifficultyModel } from "../../../services/files/analyzer-files.ts";
import { DEFAULT_PROFILES_DIR, loadProfiles } from "../../../services/files/profiles.ts";
import { routerScoring } from "../../../services/files/router-scoring.ts";
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";

const MEDIUM_LARGE: ModelPair = { light: "sd35-medium", heavy: "sd35-large" };
/** A fallback whose score is the prompt's length: easy to predict. */
const lengthScorer = { score: (p: string) => p.length };

describe("the shipped difficulty model", () => {
  const profiles = loadProfiles();
  const model = loadDifficultyModel(join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.difficultyModel));

  it("covers every pair of the pool, lighter first", () => {
    const names = profiles.models.map((m) => m.name);
    for (let l = 0; l < names.length; l++)
      for (let h = l + 1; h < names.length; h++) expect(model.pairs.has(`${names[l]}→${names[h]}`)).toBe(true);
  });

  it("scores the reference prompts out of sample (cross-fitted), not with the model that learned them", () => {
    const images = (id: number) =>
      parseDiscriminatorImageScores(
        readFileSync(join(DEFAULT_PROFILES_DIR, "reference", "discriminator", `scores_model_${id}.txt`), "utf8"),
      );
    const q = pairQuality(images(2), images(3));
    const sorted = Float64Array.from(q.gapT).sort();
    const median = sorted[sorted.length >> 1];
    const hard = Array.from(q.gapT, (t) => (t > median ? 1 : 0));
    const prompts = profiles.reference.prompts;
    const crossFitted = new LearnedDifficultyScorer(model, lengthScorer, prompts);
    expect(crossFitted.crossFitted).toBe(true);
    const heldOutAuc = rocAuc(
      prompts.map((p) => crossFitted.score(p, MEDIUM_LARGE)),
      hard,
    );
    // Without the reference list the scorer cannot know them: the fitted model scores them in sample.
    const inSample = new LearnedDifficultyScorer(model, lengthScorer, []);
    expect(inSample.crossFitted).toBe(false);
    const inSampleAuc = rocAuc(
      prompts.map((p) => inSample.score(p, MEDIUM_LARGE)),
      hard,
    );
    expect(heldOutAuc).toBeGreaterThan(0.6);
    expect(heldOutAuc).toBeLessThan(0.72);
    expect(inSampleAuc).toBeGreaterThan(heldOutAuc + 0.05);
  });

  it("scores deterministically, z-normalised over the reference prompts, in microseconds", () => {
    const scorer = new LearnedDifficultyScorer(model, lengthScorer, profiles.reference.prompts);
    const prompts = profiles.reference.prompts;
    const first = prompts.map((p) => scorer.score(p, MEDIUM_LARGE));
    const again = new LearnedDifficultyScorer(
      loadDifficultyModel(join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.difficultyModel)),
      lengthScorer,
      prompts,
    );
    expect(prompts.map((p) => again.score(p, MEDIUM_LARGE))).toEqual(first);
    const mean = first.reduce((s, v) => s + v, 0) / first.length;
    const sd = Math.sqrt(first.reduce((s, v) => s + (v - mean) ** 2, 0) / first.length);
    expect(Math.abs(mean)).toBeLessThan(1e-3);
    expect(sd).toBeCloseTo(1, 3);
    // Speed: the best of 3 passes over 5,000 prompts; 50 µs a prompt is ~20x what a loaded 2-core machine measures.
    let bestUs = Infinity;
    for (let pass = 0; pass < 3; pass++) {
      const t0 = performance.now();
      let sink = 0;
      for (const p of prompts) sink += scorer.score(p, MEDIUM_LARGE);
      bestUs = Math.min(bestUs, ((performance.now() - t0) * 1000) / prompts.length);
      expect(Number.isFinite(sink)).toBe(true);
    }
    expect(bestUs).toBeLessThan(50);
  });
});

describe("LearnedDifficultyScorer", () => {
  const file = (use: boolean) => ({
    version: 1,
    kind: "hashed-ngram-linear",
    hashBits: 4,
    ngramOrders: [1],
    columns: Array.from({ length: 16 }, (_, i) => i),
    pairs: [{ light: "l", heavy: "h", intercept: 0, weights: Array.from({ length: 16 }, (_, i) => i), scoreMean: 1, scoreStd: 2, use }],
    source: "test",
  });
  const reference = ["a", "abc", "abcde"]; // fallback scores 1, 3, 5: mean 3, sd √(8/3)

  it("scores a pair in use with the model, and any other pair or none with the z-normalised fallback", () => {
    const scorer = new LearnedDifficultyScorer(parseDifficultyModel(file(true)), lengthScorer, reference);
    const fallbackZ = (p: string) => (p.length - 3) / Math.sqrt(8 / 3);
    expect(scorer.usesModel({ light: "l", heavy: "h" })).toBe(true);
    expect(scorer.score("abcdefg", { light: "x", heavy: "y" })).toBeCloseTo(fallbackZ("abcdefg"), 12);
    expect(scorer.score("abcdefg")).toBeCloseTo(fallbackZ("abcdefg"), 12);
    // One word, one column c (weight c): raw = c / √1; served (c − 1) / 2, whatever c is.
    const s = scorer.score("storm", { light: "l", heavy: "h" });
    expect(Number.isInteger(s * 2 + 1)).toBe(true);
    expect(s).not.toBeCloseTo(fallbackZ("storm"), 6);
  });

  it("leaves a pair not in use to the fallback", () => {
    const scorer = new LearnedDifficultyScorer(parseDifficultyModel(file(false)), lengthScorer, reference);
    expect(scorer.usesModel({ light: "l", heavy: "h" })).toBe(false);
    expect(scorer.score("abcdefg", { light: "l", heavy: "h" })).toBeCloseTo((7 - 3) / Math.sqrt(8 / 3), 12);
  });

  it("serves cross-fitted scores for the reference prompts they were made for, and the model for any other prompt or list", () => {
    const reference3 = ["a", "abc", "abcde"];
    const f = { ...file(true), crossFit: { folds: 2, seed: 1, prompts: 3, promptsHash: promptsHash(reference3) } };
    f.pairs = [{ ...f.pairs[0], crossFitted: [7, 8, 9] } as (typeof f.pairs)[0]];
    const model = parseDifficultyModel(f);
    const lh = { light: "l", heavy: "h" };
    const scorer = new LearnedDifficultyScorer(model, lengthScorer, reference3);
    expect(scorer.score("abc", lh)).toBe(8);
    expect(scorer.score(" abcde ", lh)).toBe(9);
    const plain = new LearnedDifficultyScorer(parseDifficultyModel(file(true)), lengthScorer, reference3);
    expect(scorer.score("storm", lh)).toBe(plain.score("storm", lh));
    // Another prompt list (the hash differs): the cross-fitted scores are not theirs.
    const other = new LearnedDifficultyScorer(model, lengthScorer, ["a", "abc", "abcdf"]);
    expect(other.score("abc", lh)).toBe(plain.score("abc", lh));
  });

  it("starts its live threshold from the reference prompts' scores of the pairs in use", () => {
    const scorer = new LearnedDifficultyScorer(parseDifficultyModel(file(true)), lengthScorer, reference);
    const threshold = learnedLiveThreshold(scorer, reference, 100);
    const scores = reference.map((p) => scorer.score(p, { light: "l", heavy: "h" })).sort((a, b) => a - b);
    expect(threshold.isHard(scores[2] + 1e-9, 0.34)).toBe(true);
    expect(threshold.isHard(scores[0] - 1e-9, 0.34)).toBe(false);
  });
});

describe("routerScoring", () => {
  it("builds the learned scorer from the profiles, and refuses a malformed model file naming it", () => {
    const profiles = loadProfiles();
    const { scorer } = routerScoring("learned", profiles);
    expect(scorer).toBeInstanceOf(LearnedDifficultyScorer);
    expect(Number.isFinite(scorer.score("a cat on a mat", MEDIUM_LARGE))).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), "hadis-dm-"));
    const bad = join(dir, "bad.json");
    writeFileSync(
      bad,
      JSON.stringify({ version: 1, kind: "hashed-ngram-linear", hashBits: 4, ngramOrders: [1], columns: [1], pairs: [], source: "x" }),
    );
    expect(() => routerScoring("learned", profiles, { difficultyModelPath: bad })).toThrow(new RegExp(`difficulty model ${bad}: pairs`));
  });
});

describe("decideRoute with a per-pair scorer", () => {
  it("scores each prompt under the plan's pair", () => {
    const seen: (ModelPair | undefined)[] = [];
    const plan: Plan = {
      v: PROTOCOL_VERSION,
      epoch: 1,
      policy: "test",
      issuedAtMs: 0,
      sloMs: 1_000,
      timeScale: 1,
      pair: { light: "l", heavy: "h" },
      routerThreshold: 0.5,
      discThreshold: 0.2,
      heavyShare: 0.5,
      models: {},
      assignment: {},
      reason: "test",
    };
    decideRoute(plan, "a cat", "req-1", { score: (_p, pair) => (seen.push(pair), 1) }, new FixedPercentileThreshold([0, 2]));
    expect(seen).toEqual([{ light: "l", heavy: "h" }]);
  });
});
