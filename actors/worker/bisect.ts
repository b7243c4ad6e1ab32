/**
 * Running a batch that fails in halves: a batch too big for the GPU's memory runs as two smaller
 * ones, and one bad item fails alone instead of failing every item with it. A batch fails whole
 * when both its halves fail too (the model, not an item, is at fault): no further splitting.
 */

/** One run of some items: their results in order, or why it failed. */
export type Attempt<I, R> = (items: readonly I[]) => Promise<{ ok: true; results: R[] } | { ok: false; error: Error }>;

/** Each item's outcome, in the batch's order; `runs` counts the attempts made. */
export interface SplitOutcome<R> {
  outcomes: ({ ok: true; result: R } | { ok: false; error: Error })[];
  runs: number;
  /** The whole batch ran at once (no failure). */
  whole: boolean;
}

/** Runs `items` at once; if that fails, in halves, then the failing halves' halves, and so on (see above). */
export async function runSplitting<I, R>(items: readonly I[], attempt: Attempt<I, R>): Promise<SplitOutcome<R>> {
  let runs = 1;
  const first = await attempt(items);
  if (first.ok) return { outcomes: first.results.map((result) => ({ ok: true, result })), runs, whole: true };
  const failed = (n: number, error: Error) => Array.from({ length: n }, () => ({ ok: false as const, error }));
  const split = async (part: readonly I[], error: Error): Promise<SplitOutcome<R>["outcomes"]> => {
    if (part.length === 1) return failed(1, error);
    const half = Math.ceil(part.length / 2);
    const [a, b] = [part.slice(0, half), part.slice(half)];
    runs += 2;
    const [ra, rb] = [await attempt(a), await attempt(b)];
    if (!ra.ok && !rb.ok) return failed(part.length, rb.error);
    const side = async (p: readonly I[], r: typeof ra) => (r.ok ? r.results.map((result) => ({ ok: true as const, result })) : split(p, r.error));
    return [...(await side(a, ra)), ...(await side(b, rb))];
  };
  return { outcomes: await split(items, first.error), runs, whole: false };
}
