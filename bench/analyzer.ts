/**
 * Prompt-analyzer benchmark: speed over the 5,000 reference prompts (warm-up, then several
 * timed passes; prompts/s and per-prompt p50/p99) and agreement with the reference features
 * (per-feature exact-match rate and Pearson r; Spearman ρ of our score vs the reference score).
 * Run: node --import tsx bench/analyzer.ts [--passes 5]. Writes bench/results/analyzer.json.
 */
import { fileURLToPath } from "node:url";
import { exactMatchRate, pearson, spearman } from "../actors/analyzer/agreement.ts";
import { createPromptAnalyzer } from "../actors/analyzer/analyzer.ts";
import { applyRarityOverrides } from "../actors/analyzer/lexicons.ts";
import { isRare, rarityKey } from "../actors/analyzer/features.ts";
import { fitRarityOverrides } from "../actors/analyzer/rarity-fit.ts";
import { retag } from "../actors/analyzer/retag.ts";
import { featureVector, scoreVector } from "../actors/analyzer/score-model.ts";
import { createWinkTagger } from "../actors/analyzer/tagger.ts";
import { quantileSorted } from "../actors/profile/stats.ts";
import { FEATURE_NAMES } from "../actors/profile/reference.ts";
import { loadAnalyzerLexicons, loadPromptAnalyzer, writeJsonFile } from "../services/files/analyzer-files.ts";
import { loadProfiles } from "../services/files/profiles.ts";

const passesArg = process.argv.indexOf("--passes");
const passes = passesArg > 0 ? Number(process.argv[passesArg + 1]) : 5;
const { prompts, features: refFeatures } = loadProfiles().reference;
const analyzer = loadPromptAnalyzer();

// Speed: one warm-up pass, then timed passes; per-prompt latency from performance.now().
let sink = 0;
for (const p of prompts) sink += analyzer.analyzePrompt(p).score;
const latenciesMs = new Float64Array(prompts.length * passes);
let wallMs = 0;
for (let pass = 0; pass < passes; pass++) {
  const start = performance.now();
  let prev = start;
  for (let i = 0; i < prompts.length; i++) {
    sink += analyzer.analyzePrompt(prompts[i]).score;
    const now = performance.now();
    latenciesMs[pass * prompts.length + i] = now - prev;
    prev = now;
  }
  wallMs += prev - start;
}
latenciesMs.sort();
const speed = {
  prompts: prompts.length,
  passes,
  promptsPerSecond: (prompts.length * passes) / (wallMs / 1000),
  p50Ms: quantileSorted(latenciesMs, 0.5),
  p99Ms: quantileSorted(latenciesMs, 0.99),
  maxMs: latenciesMs[latenciesMs.length - 1],
};

// Agreement with the reference features and score.
const ours = prompts.map((p) => featureVector(analyzer.analyzePrompt(p).features));
const perFeature = FEATURE_NAMES.map((name, k) => {
  const a = ours.map((v) => v[k]);
  const b = refFeatures.map((v) => v[k]);
  return { feature: name, exactMatch: exactMatchRate(a, b), pearson: pearson(a, b) };
});
const model = analyzer.scoreModel;
const ourScores = ours.map((v) => scoreVector(v, model));
const refScores = refFeatures.map((v) => scoreVector(v, model));
const score = { spearman: spearman(ourScores, refScores), pearson: pearson(ourScores, refScores) };

// The rarity overrides were fitted on all 5,000 prompts; estimate out-of-sample agreement by
// fitting on the even prompts and scoring the odd ones.
const base = loadAnalyzerLexicons(undefined, false);
const tagger = createWinkTagger();
const words = prompts.map((p) => {
  const t = retag(tagger.tag(p.toLowerCase()), base.dominantPos);
  return t.words.filter((_, j) => !t.isPunct[j]).map(rarityKey);
});
const refRarity = refFeatures.map((v) => v[1]);
const even = prompts.map((_, i) => i).filter((i) => i % 2 === 0);
const odd = prompts.map((_, i) => i).filter((i) => i % 2 === 1);
const half = fitRarityOverrides({ words, referenceCounts: refRarity, rows: even, isRareBase: (w) => isRare(w, base.commonWords) });
const rareOdd = (w: string) => half.get(w) ?? isRare(w, base.commonWords);
const oddOurs = odd.map((i) => words[i].filter(rareOdd).length);
const oddBase = odd.map((i) => words[i].filter((w) => isRare(w, base.commonWords)).length);
const oddRef = odd.map((i) => refRarity[i]);
// The whole score on the odd prompts when the analyzer only knows the even-fitted overrides.
const heldOutAnalyzer = createPromptAnalyzer({ ...base, commonWords: applyRarityOverrides(base.commonWords, half) }, model);
const oddScores = odd.map((i) => heldOutAnalyzer.analyzePrompt(prompts[i]).score);
const rarityHeldOut = {
  subtlexOnly: { exactMatch: exactMatchRate(oddBase, oddRef), pearson: pearson(oddBase, oddRef) },
  overridesFromEvenPrompts: { exactMatch: exactMatchRate(oddOurs, oddRef), pearson: pearson(oddOurs, oddRef), overrides: half.size },
  scoreSpearmanOnOddPrompts: spearman(
    oddScores,
    odd.map((i) => refScores[i]),
  ),
};

const f3 = (x: number) => x.toFixed(3);
console.log(
  `speed: ${speed.promptsPerSecond.toFixed(0)} prompts/s, p50 ${(speed.p50Ms * 1000).toFixed(1)} µs, p99 ${(speed.p99Ms * 1000).toFixed(1)} µs, max ${speed.maxMs.toFixed(2)} ms (${passes} passes × ${prompts.length})`,
);
console.log("feature            exact   pearson");
for (const r of perFeature) console.log(`${r.feature.padEnd(18)} ${f3(r.exactMatch)}   ${f3(r.pearson)}`);
console.log(`score              spearman ${f3(score.spearman)}  pearson ${f3(score.pearson)}`);
console.log(
  `tokenRarity held-out (odd prompts): SUBTLEX only exact ${f3(rarityHeldOut.subtlexOnly.exactMatch)} r ${f3(rarityHeldOut.subtlexOnly.pearson)}; ` +
    `with overrides fitted on even prompts exact ${f3(rarityHeldOut.overridesFromEvenPrompts.exactMatch)} r ${f3(rarityHeldOut.overridesFromEvenPrompts.pearson)}; ` +
    `score Spearman on odd prompts ${f3(rarityHeldOut.scoreSpearmanOnOddPrompts)}`,
);
const out = fileURLToPath(new URL("./results/analyzer.json", import.meta.url));
writeJsonFile(out, {
  node: process.version,
  speed,
  agreement: { perFeature, score, rarityHeldOut },
  scoreModelSource: model.source,
  checksum: sink,
});
console.log(`wrote ${out}`);
