/** Router-weights files, score normalisation, lexicon parsers and the rarity-override fit. */
import { describe, expect, it } from "vitest";
import {
  applyRarityOverrides,
  commonWordsFromCounts,
  formatRarityOverrides,
  parseAbstractWords,
  parseDominantPos,
  parseRarityOverrides,
  parseSpatialTerms,
} from "../../../actors/analyzer/lexicons.ts";
import { fitRarityOverrides } from "../../../actors/analyzer/rarity-fit.ts";
import { fitNormalisation, parseScoreModel, scoreVector, toScoreModelFile } from "../../../actors/analyzer/score-model.ts";
import { FEATURE_NAMES, REFERENCE_WEIGHTS } from "../../../actors/profile/reference.ts";
import { meanStd } from "../../../actors/profile/stats.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";
import { ANALYZER_PATHS, loadScoreModel } from "../../../services/files/analyzer-files.ts";
import { DEFAULT_PROFILES_DIR } from "../../../services/files/profiles.ts";
import { join } from "node:path";

const file = {
  featureNames: [...FEATURE_NAMES].reverse(),
  means: [8, 7, 6, 5, 4, 3, 2, 1],
  stds: [1, 1, 1, 1, 1, 1, 1, 2],
  weights: [0, 0, 0, 0, 0, 0, 0, 1],
  source: "test",
};

describe("score model", () => {
  it("reorders a file to FEATURE_NAMES order", () => {
    const m = parseScoreModel(file);
    expect(m.means[0]).toBe(1); // promptLength was last
    expect(m.stds[0]).toBe(2);
    expect(m.weights[0]).toBe(1);
    expect(scoreVector([5, 0, 0, 0, 0, 0, 0, 0], m)).toBe(2); // (5 − 1) / 2
  });
  it("rejects bad files with a message naming the field", () => {
    expect(() => parseScoreModel({ ...file, weights: [1] })).toThrow(/weights/);
    expect(() => parseScoreModel({ ...file, stds: [-1, 1, 1, 1, 1, 1, 1, 1] })).toThrow(/stds/);
    expect(() => parseScoreModel({ ...file, featureNames: Array(8).fill("promptLength") })).toThrow(/once/);
    expect(() => parseScoreModel({ ...file, means: [Number.NaN, 0, 0, 0, 0, 0, 0, 0] })).toThrow();
  });
  it("a zero-spread feature contributes nothing", () => {
    const m = fitNormalisation(
      [
        [1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 3],
      ],
      REFERENCE_WEIGHTS,
      "t",
    );
    expect(scoreVector([99, 1, 1, 1, 1, 1, 1, 1], m)).toBeCloseTo(-0.01, 12); // only namedEntities varies
  });
  it("round-trips through the file form", () => {
    const m = parseScoreModel(file);
    expect(parseScoreModel(toScoreModelFile(m))).toEqual(m);
  });
  it("the shipped router-weights.json holds the reference weights and the reference features' mean/std", () => {
    const m = loadScoreModel(join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.referenceWeights));
    expect([...m.weights]).toEqual([...REFERENCE_WEIGHTS]);
    const features = loadProfiles().reference.features;
    FEATURE_NAMES.forEach((_, k) => {
      const { mean, std } = meanStd(features.map((f) => f[k]));
      expect(m.means[k]).toBeCloseTo(mean, 9);
      expect(m.stds[k]).toBeCloseTo(std, 9);
    });
  });
});

describe("lexicon parsers", () => {
  const csv =
    "Word,Bigram,Conc.M,Conc.SD,Unknown,Total,Percent_known,SUBTLEX,Dom_Pos\na,0,1.46,1,0,30,1,100,Article\ndog,0,4.9,1,0,30,1,100,Noun\nidea,0,1.6,1,0,30,1,100,Noun\nsea urchin,1,4.9,1,0,30,1,0,#N/A\nborder,0,2.5,1,0,30,1,0,Noun\n";
  it("abstract words are single words rated strictly below 2.5", () => {
    expect([...parseAbstractWords(csv)].sort()).toEqual(["a", "idea"]);
  });
  it("dominant POS skips #N/A and bigrams", () => {
    const d = parseDominantPos(csv);
    expect(d.get("dog")).toBe("Noun");
    expect(d.has("sea urchin")).toBe(false);
  });
  it("common words sum case variants before the cut", () => {
    const c = commonWordsFromCounts(
      [
        { word: "Paris", count: 200 },
        { word: "paris", count: 200 },
        { word: "rare", count: 10 },
      ],
      350,
    );
    expect([...c]).toEqual(["paris"]);
  });
  it("spatial terms split into word sequences", () => {
    expect(parseSpatialTerms("in\n\nin front of\n")).toEqual([["in"], ["in", "front", "of"]]);
  });
  it("rarity overrides parse, format and apply", () => {
    const o = parseRarityOverrides("# header\nwooden\tcommon\nthe\trare\n");
    expect(parseRarityOverrides(formatRarityOverrides(o, "h"))).toEqual(o);
    expect([...applyRarityOverrides(new Set(["the", "dog"]), o)].sort()).toEqual(["dog", "wooden"]);
    expect(() => parseRarityOverrides("x\tmaybe")).toThrow(/rare or common/);
  });
});

describe("fitRarityOverrides", () => {
  it("flips a word whose label the reference counts contradict in several prompts", () => {
    // Base says "wooden" is rare; the reference says these prompts have no rare word.
    const words = [
      ["a", "wooden", "box"],
      ["wooden", "chair"],
      ["a", "box"],
      ["a", "zyx"],
    ];
    const ref = [0, 0, 0, 1];
    const base = (w: string) => w === "wooden" || w === "zyx";
    const o = fitRarityOverrides({ words, referenceCounts: ref, rows: [0, 1, 2, 3], isRareBase: base, minGain: 2 });
    expect([...o]).toEqual([["wooden", false]]);
  });
  it("needs minGain prompts of evidence", () => {
    const o = fitRarityOverrides({ words: [["wooden"]], referenceCounts: [0], rows: [0], isRareBase: () => true, minGain: 2 });
    expect(o.size).toBe(0);
  });
});
