/** Small numeric helpers shared by the routing policy, the judge and scoring. */

/** Quantile of ascending-sorted values with linear interpolation (numpy's default). */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const pos = Math.min(Math.max(q, 0), 1) * (n - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, n - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/** Returns a sorted copy. */
export function sortedCopy(values: ArrayLike<number>): Float64Array {
  return Float64Array.from(values as ArrayLike<number>).sort();
}

/** 32-bit FNV-1a hash of a string: a stable seed from prompt text. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Mean and population standard deviation. */
export function meanStd(values: ArrayLike<number>): { mean: number; std: number } {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i];
  const mean = values.length ? sum / values.length : 0;
  let ss = 0;
  for (let i = 0; i < values.length; i++) ss += (values[i] - mean) ** 2;
  return { mean, std: values.length ? Math.sqrt(ss / values.length) : 0 };
}

/** Deterministic 32-bit PRNG (mulberry32): uniform in [0, 1). Same seed, same sequence. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
