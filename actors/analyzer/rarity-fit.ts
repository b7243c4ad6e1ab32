/**
 * Learns per-word rarity corrections from the reference's token-rarity counts. The reference
 * used wordfreq (a blend of web, books and subtitles) which is not available here; SUBTLEX-US
 * (subtitles only) disagrees on words like "wooden" or "laptop". Each prompt's count is one
 * linear constraint on its words' rare/common labels; coordinate descent flips a word's
 * label when that lowers the total absolute count error by at least `minGain` prompts.
 */

/** Inputs: each prompt's lookup words, the reference count, and the base rarity test. */
export interface RarityFitInput {
  words: readonly (readonly string[])[];
  referenceCounts: ArrayLike<number>;
  /** Rows (prompt indices) to learn from. */
  rows: readonly number[];
  isRareBase: (word: string) => boolean;
  /** Smallest error reduction (in prompts) that justifies a flip; 2 keeps one-off evidence out. */
  minGain?: number;
  maxSweeps?: number;
}

/** Word → rare (true) / common (false) where the fit disagrees with the base test. */
export function fitRarityOverrides(input: RarityFitInput): Map<string, boolean> {
  const minGain = input.minGain ?? 2;
  const label = new Map<string, boolean>();
  /** Word → (row → occurrences in that row). */
  const occurrences = new Map<string, Map<number, number>>();
  const current = new Map<number, number>();
  for (const row of input.rows) {
    let count = 0;
    for (const w of input.words[row]) {
      if (!label.has(w)) label.set(w, input.isRareBase(w));
      let rows = occurrences.get(w);
      if (!rows) occurrences.set(w, (rows = new Map()));
      rows.set(row, (rows.get(row) ?? 0) + 1);
      if (label.get(w)) count++;
    }
    current.set(row, count);
  }
  // Visit words in a fixed order so the result does not depend on Map insertion quirks.
  const order = [...occurrences.keys()].sort();
  for (let sweep = 0; sweep < (input.maxSweeps ?? 5); sweep++) {
    let flips = 0;
    for (const w of order) {
      const rows = occurrences.get(w)!;
      const sign = label.get(w) ? -1 : 1;
      let gain = 0;
      for (const [r, times] of rows) {
        const c = current.get(r)!;
        const ref = input.referenceCounts[r];
        gain += Math.abs(ref - c) - Math.abs(ref - c - sign * times);
      }
      if (gain >= minGain) {
        label.set(w, !label.get(w));
        for (const [r, times] of rows) current.set(r, current.get(r)! + sign * times);
        flips++;
      }
    }
    if (flips === 0) break;
  }
  const overrides = new Map<string, boolean>();
  for (const [w, rare] of label) if (rare !== input.isRareBase(w)) overrides.set(w, rare);
  return overrides;
}
