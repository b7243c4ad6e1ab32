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

/** First index in ascending `sorted[0..n)` whose value is > x. */
export function upperBound(sorted: ArrayLike<number>, n: number, x: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index in ascending `sorted[0..n)` whose value is ≥ x. */
export function lowerBound(sorted: ArrayLike<number>, n: number, x: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Whether `score` is in the top `share` of the ascending distribution `sorted[0..n)`. The scores
 * strictly above it take the first places; the ones equal to it (itself at least) share what is
 * left, each hard with probability (share·n − above) / tied, decided by `tieBreak` in [0, 1) (a
 * hash of the request id). So exactly `share` of a stationary mix is hard in expectation however
 * many scores tie: a prompt sent a thousand times is not routed all one way, and share·n landing a
 * rounding error above a whole number (0.07·100) admits no extra score. share ≤ 0: never; ≥ 1: always.
 */
export function inTopShare(sorted: ArrayLike<number>, n: number, score: number, share: number, tieBreak = 0.5): boolean {
  if (!(share > 0)) return false;
  if (share >= 1) return true;
  if (Number.isNaN(score) || n === 0) return false;
  const hi = upperBound(sorted, n, score);
  const tied = Math.max(1, hi - lowerBound(sorted, n, score));
  return n - hi + tieBreak * tied < share * n;
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

/**
 * A uniform draw in [0, 1) from a string: FNV-1a, then murmur3's finaliser. FNV-1a alone keeps
 * strings that differ in their last characters (a counter, a time-ordered id) close in its high
 * bits, so consecutive requests drew alike: runs of them went to the heavy model together.
 */
export function unitDraw(text: string): number {
  let h = fnv1a(text);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 0x100000000;
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
