/**
 * `hadis train-router`: learns the per-pair difficulty model (ridge regression on hashed word
 * unigrams and bigrams of Welch's t of the heavy − light image log-odds), measures it on
 * held-out prompts against the reference weights (ROC AUC of the "hard" label, and the P(real)
 * the cascade serves at the lookup tables' router shares), marks `use` on the pairs where it
 * raised served quality, and writes the model fitted on all prompts (or, with `--holdout-seed`,
 * on that split's training prompts, with its held-out prompts written beside it for `hadis sim`).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  crossFittedScores,
  fitNgramRidge,
  ngramFitScore,
  splitByPrompt,
  hardLabelsFrom,
  toDifficultyModelFile,
  type PairFitEntry,
} from "../../../actors/analyzer/difficulty-training.ts";
import { promptsHash } from "../../../actors/analyzer/difficulty-model.ts";
import {
  pairQuality,
  raisesServedQuality,
  studyPair,
  summariseStudy,
  tablePoints,
  type ScorerSummary,
} from "../../../actors/analyzer/difficulty-study.ts";
import { ngramRow, promptWords } from "../../../actors/analyzer/text-features.ts";
import { parseDiscriminatorImageScores } from "../../../actors/profile/reference.ts";
import { ANALYZER_PATHS, loadPromptAnalyzer, writeTextFile } from "../../files/analyzer-files.ts";
import { DEFAULT_PROFILES_DIR, loadProfiles } from "../../files/profiles.ts";
import { ConfigurationError } from "../../../contracts/errors.ts";

/** Hashed columns of the shipped model (2^18: an unseen word rarely lands on a learned column). */
export const HASH_BITS = 18;
/** Unigrams and bigrams. */
export const NGRAM_ORDERS = [1, 2] as const;
/** Share of prompts learned on in each held-out split. */
export const TRAIN_FRACTION = 0.8;
/** Folds of the cross-fitted reference scores, and their seed. */
export const CROSS_FIT = { folds: 5, seed: 20260405 } as const;

/** Options of `trainRouterCommand`. */
export interface TrainRouterOptions {
  /** Pairs as "light:heavy" reference ids, comma-separated (default: every pair of the pool, lighter first). */
  pairs?: string;
  /** Held-out splits (seeds 1..n). */
  seeds?: number;
  out?: string;
  /** Fit on this seed's training prompts only and write its held-out prompts to `holdoutPrompts`. */
  holdoutSeed?: number;
  holdoutPrompts?: string;
  /** Mark every pair `use` (for simulator experiments), not only those where served quality rose. */
  useAll?: boolean;
}

/** The pairs to train: the given list, or every (lighter, heavier) pair of reference ids. */
function pairsOf(text: string | undefined, ids: readonly number[]): [number, number][] {
  if (!text) return ids.flatMap((l, i) => ids.slice(i + 1).map((h) => [l, h] as [number, number]));
  return text.split(",").map((t) => {
    const m = /^\s*(\d+)\s*:\s*(\d+)\s*$/.exec(t);
    if (!m || m[1] === m[2] || !ids.includes(Number(m[1])) || !ids.includes(Number(m[2])))
      throw new ConfigurationError(`--pairs: "${t}" is not light:heavy of two reference ids in ${ids.join(", ")}`);
    return [Number(m[1]), Number(m[2])];
  });
}

/** Runs the study and writes the model file; returns each pair's summary. */
export async function trainRouterCommand(opts: TrainRouterOptions): Promise<Record<string, Record<string, ScorerSummary>>> {
  const profiles = loadProfiles();
  const prompts = profiles.reference.prompts;
  const ids = [...profiles.nameByReferenceId.keys()].sort((a, b) => a - b);
  const pairs = pairsOf(opts.pairs, ids);
  const seeds = Array.from({ length: opts.seeds ?? 5 }, (_, i) => i + 1);
  const images = (id: number) =>
    parseDiscriminatorImageScores(readFileSync(join(DEFAULT_PROFILES_DIR, "reference", "discriminator", `scores_model_${id}.txt`), "utf8"));
  const analyzer = loadPromptAnalyzer();
  const referenceScores = prompts.map((p) => analyzer.analyzePrompt(p).score);
  const rows = prompts.map((p) => ngramRow(promptWords(p), HASH_BITS, NGRAM_ORDERS));
  const tableRows = [...profiles.reference.paretoHybrid, ...profiles.reference.paretoRouterOnly];
  const all = prompts.map((_, i) => i);
  const finalRows = opts.holdoutSeed !== undefined ? splitByPrompt(prompts, TRAIN_FRACTION, opts.holdoutSeed).train : all;

  const entries: PairFitEntry[] = [];
  const report: Record<string, Record<string, ScorerSummary>> = {};
  for (const [l, h] of pairs) {
    const light = profiles.nameByReferenceId.get(l)!;
    const heavy = profiles.nameByReferenceId.get(h)!;
    const quality = pairQuality(images(l), images(h));
    const points = tablePoints(tableRows, l, h);
    const t0 = performance.now();
    const study = studyPair({
      prompts,
      quality,
      points,
      seeds,
      trainFraction: TRAIN_FRACTION,
      scorers: {
        random: () => null,
        reference: () => (i) => referenceScores[i],
        learned: (train, labels, seed) => {
          const fit = fitNgramRidge(rows, quality.gapT, labels, train, { seed });
          return (i) => ngramFitScore(fit, rows[i]);
        },
      },
    });
    const summary = summariseStudy(study);
    report[`${light}→${heavy}`] = summary;
    const use = opts.useAll === true || raisesServedQuality(summary.learned);
    const fit = fitNgramRidge(rows, quality.gapT, hardLabelsFrom(quality.gapT, finalRows), finalRows, { seed: 1 });
    // A held-out model must not know its held-out prompts' scores in any form: no cross-fitting there.
    const crossFitted =
      opts.holdoutSeed === undefined ? crossFittedScores(rows, quality.gapT, prompts, CROSS_FIT.folds, CROSS_FIT.seed) : undefined;
    entries.push({
      light,
      heavy,
      fit,
      referenceScores: rows.map((r) => ngramFitScore(fit, r)),
      use,
      ...(crossFitted ? { crossFitted } : {}),
      extra: {
        heldOut: {
          seeds: seeds.length,
          trainFraction: TRAIN_FRACTION,
          auc: { learned: summary.learned.auc, reference: summary.reference.auc, random: summary.random.auc },
          servedGain: summary.learned.gain,
          gainPerPoint: summary.learned.gainPerPoint,
        },
      },
    });
    printPair(light, heavy, summary, use, fit.l2, (performance.now() - t0) / 1000);
  }
  const out = opts.out ?? join(DEFAULT_PROFILES_DIR, ANALYZER_PATHS.difficultyModel);
  const on =
    opts.holdoutSeed !== undefined
      ? `the ${finalRows.length} training prompts of held-out split ${opts.holdoutSeed} (${TRAIN_FRACTION} by prompt text)`
      : `all ${prompts.length} reference prompts`;
  const source =
    `hadis train-router${opts.holdoutSeed !== undefined ? ` --holdout-seed ${opts.holdoutSeed}` : ""}${opts.useAll ? " --use-all" : ""}: per pair, ridge regression (truncated Newton; l2 by 5-fold CV on held-out AUC) of ` +
    `Welch's t of the heavy − light image log-odds (clipped to ±4) on hashed word unigrams and bigrams (2^${HASH_BITS} columns, each present n-gram 1/√count), fitted on ${on}; ` +
    `score = prediction z-normalised over the reference prompts${opts.holdoutSeed === undefined ? `; crossFitted = each reference prompt's score from the model of the ${CROSS_FIT.folds}-fold split (by prompt text, seed ${CROSS_FIT.seed}) that left it out, z-normalised, served for those prompts` : ""}. use = the held-out served P(real) at the tables' router shares rose over the reference weights by more than 2 standard errors over ${seeds.length} splits${opts.useAll ? " (overridden: every pair in use)" : ""}.`;
  const crossFit =
    opts.holdoutSeed === undefined ? { ...CROSS_FIT, prompts: prompts.length, promptsHash: promptsHash(prompts) } : undefined;
  writeTextFile(out, compactJson(toDifficultyModelFile(entries, HASH_BITS, NGRAM_ORDERS, source, crossFit)));
  console.log(`wrote ${out}`);
  if (opts.holdoutSeed !== undefined) {
    const test = splitByPrompt(prompts, TRAIN_FRACTION, opts.holdoutSeed).test;
    const path = opts.holdoutPrompts ?? out.replace(/\.json$/, "") + "-heldout-prompts.txt";
    writeTextFile(path, test.map((i) => prompts[i]).join("\n") + "\n");
    console.log(`wrote ${path} (${test.length} held-out prompts)`);
  }
  return report;
}

/** Pretty JSON with every array of numbers on one line (the weight arrays hold ~13,000 numbers each). */
export function compactJson(value: unknown): string {
  return (
    JSON.stringify(value, null, 2).replace(
      /\[\s*(-?[\d.eE+-]+(?:,\s*-?[\d.eE+-]+)*)\s*\]/g,
      (_, body: string) => `[${body.replace(/,\s+/g, ",")}]`,
    ) + "\n"
  );
}

function printPair(light: string, heavy: string, s: Record<string, ScorerSummary>, use: boolean, l2: number, seconds: number): void {
  const a = (x: ScorerSummary) => `${x.auc.mean.toFixed(3)} ± ${x.auc.sd.toFixed(3)}`;
  console.log(
    `${light} → ${heavy} (${seconds.toFixed(0)} s): held-out AUC learned ${a(s.learned)}, reference ${a(s.reference)}, random ${a(s.random)}`,
  );
  const g = s.learned.gain;
  console.log(
    `  served P(real), learned − reference, mean over ${s.learned.gainPerPoint.length} table points: ${g.mean >= 0 ? "+" : ""}${g.mean.toExponential(2)} (SE ${g.se.toExponential(2)}) → use ${use}; l2 ${l2}`,
  );
  for (const p of s.learned.gainPerPoint)
    console.log(`    r=${p.share} conf=${p.conf}: ${p.mean >= 0 ? "+" : ""}${p.mean.toExponential(2)} ± ${p.sd.toExponential(2)}`);
}
