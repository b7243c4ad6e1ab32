/**
 * hadis-plus's batch rule at the worker: a batch is only as large as its tightest deadline allows.
 * The plan's batch size buys throughput, but an item that would be done in time alone and is late
 * in the full batch is a violation the batch made. Of the items pulled, tightest deadline first, the
 * worker runs the largest group in which every item that could be in time is, and gives the others
 * back to the queue for the next free worker. An item late even alone does not shrink the batch:
 * nothing this worker does can save it. Pure: deadlines and the expected batch time in, a count out.
 */

/** The pulled items ordered tightest deadline first (stable: equal deadlines keep their queue order). */
export function byDeadline<T>(items: readonly T[], deadlineOf: (item: T) => number): T[] {
  return items
    .map((item, i) => ({ item, i }))
    .sort((a, b) => deadlineOf(a.item) - deadlineOf(b.item) || a.i - b.i)
    .map((x) => x.item);
}

/**
 * How many of `deadlinesMs` (ascending) to run now: the largest n whose batch, started at `nowMs`
 * and taking `expectedMs(n)`, ends by the deadline of each of its first n items that one alone
 * would meet. At least 1 when any were given.
 */
export function fittingBatchSize(deadlinesMs: readonly number[], nowMs: number, expectedMs: (n: number) => number): number {
  const aloneEndMs = nowMs + expectedMs(1);
  for (let n = deadlinesMs.length; n > 1; n--) {
    const endMs = nowMs + expectedMs(n);
    if (deadlinesMs.slice(0, n).every((d) => d < aloneEndMs || endMs <= d)) return n;
  }
  return Math.min(1, deadlinesMs.length);
}

/**
 * The pulled items split by the rule: those to run now, tightest deadline first, and those to give
 * back to the queue. Those in `stays` (items on their last delivery, live) run either way.
 */
export function fitBatch<T>(
  pulled: readonly T[],
  deadlineOf: (item: T) => number,
  nowMs: number,
  expectedMs: (n: number) => number,
  stays: readonly T[] = [],
): { run: T[]; back: T[] } {
  const ordered = byDeadline(pulled, deadlineOf);
  const n = fittingBatchSize(ordered.map(deadlineOf), nowMs, expectedMs);
  const run = ordered.filter((item, i) => i < n || stays.includes(item));
  return { run, back: ordered.filter((item) => !run.includes(item)) };
}
