/**
 * Running a batch that fails in halves, and the failing halves in halves, down to single items:
 * a batch too big for the GPU's memory runs as smaller ones, and a bad item fails alone instead
 * of failing every item with it. Each part that runs is handed on at once (its images wait for
 * no other part); a stop or a new plan ends the splitting, leaving the rest not run.
 */

/** One run of some items: their results in order, or why it failed. */
export type Attempt<I, R> = (items: readonly I[]) => Promise<{ ok: true; results: R[] } | { ok: false; error: Error }>;

/** What `runSplitting` calls along the way. */
export interface SplitPorts<I, R> {
  /** A part ran: its items and their results, in order. */
  served(items: readonly I[], results: R[]): void;
  /** True to split no further (the worker stops, or leaves the model). */
  stopped(): boolean;
  /** Of a part about to run after a failure, the items still worth running (the others, e.g. past their deadline, are `dropped`). */
  keep?(items: readonly I[]): I[];
}

/** How a batch ran. */
export interface SplitOutcome<I> {
  /** Items that failed alone (or, stopped, whose part failed), each with its error. */
  failed: { item: I; error: Error }[];
  /** Items never run (stopped before their part was). */
  notRun: I[];
  /** Items `keep` left out of a later part (not run, not failed). */
  dropped: I[];
  /** The first run's error, when a run failed (its items may have been served in parts, or dropped, since). */
  firstError?: Error;
  /** Items served. */
  served: number;
  /** Runs made. */
  runs: number;
  /** The whole batch ran at once. */
  whole: boolean;
  /** The largest part that ran (0: none did). */
  largestRun: number;
}

/** Runs `items` at once; if that fails, in halves, and so on (see above). */
export async function runSplitting<I, R>(items: readonly I[], attempt: Attempt<I, R>, ports: SplitPorts<I, R>): Promise<SplitOutcome<I>> {
  const out: SplitOutcome<I> = { failed: [], notRun: [], dropped: [], served: 0, runs: 0, whole: false, largestRun: 0 };
  const run = async (given: readonly I[]): Promise<void> => {
    if (out.runs > 0 && ports.stopped()) {
      out.notRun.push(...given);
      return;
    }
    // A failed run took time: what has meanwhile become pointless (a deadline passed) is not run again.
    const part = out.runs > 0 && ports.keep ? ports.keep(given) : given;
    if (part.length < given.length) out.dropped.push(...given.filter((item) => !part.includes(item)));
    if (part.length === 0) return;
    out.runs++;
    const r = await attempt(part);
    if (!r.ok) out.firstError ??= r.error;
    if (r.ok) {
      out.served += part.length;
      out.largestRun = Math.max(out.largestRun, part.length);
      ports.served(part, r.results);
      return;
    }
    if (part.length === 1 || ports.stopped()) {
      for (const item of part) out.failed.push({ item, error: r.error });
      return;
    }
    const half = Math.ceil(part.length / 2);
    await run(part.slice(0, half));
    await run(part.slice(half));
  };
  await run(items);
  out.whole = out.runs === 1 && out.served === items.length;
  return out;
}
