/**
 * What a worker's batches of its loaded model have shown: whether the model is failing here
 * (batches in a row whose every item failed alone, on two prompts at least), and the largest
 * batch it takes (below the plan's after a batch ran only in parts: one too big for the GPU's
 * memory). A load starts both afresh.
 */
import type { SplitOutcome } from "./bisect.ts";

/** Batches run whole at a lowered batch cap before the cap doubles again. */
export const CAP_RUNS_TO_GROW = 16;

export class BatchRecord {
  /** Batches in a row whose every item failed, and (two of) their prompts. */
  private failedInARow = 0;
  private readonly failedPrompts = new Set<string>();
  /** The largest batch to take; batches run whole at it since it was set. */
  private capSize = Number.POSITIVE_INFINITY;
  private capRuns = 0;

  /** A model loaded (or one about to be unloaded): nothing known of it yet. */
  reset(): void {
    this.failedInARow = 0;
    this.failedPrompts.clear();
    this.capAt(Number.POSITIVE_INFINITY);
  }

  /** Batches in a row whose every item failed. */
  get inARow(): number {
    return this.failedInARow;
  }

  /** The model fails here: its last `after` batches failed in every item, on two prompts at least. */
  failing(after: number): boolean {
    return this.failedInARow >= after && this.failedPrompts.size >= 2;
  }

  /** The batch size to take when the plan says `planned`. */
  size(planned: number): number {
    return Math.min(planned, this.capSize);
  }

  /**
   * Learns from a batch of `prompts` that ran as `run` under a plan batch size of `planned`.
   * Every item failed, each alone too: one more failure of the model. Every item ran, but not all
   * at once: the batch was too big, so at most the largest part that ran from now on. It ran
   * whole at the cap `CAP_RUNS_TO_GROW` times: twice the cap (no cap once that reaches the
   * plan's), so a passing fault does not cost the batch size for good. Some items failed alone:
   * theirs is the fault, not the size's.
   */
  learn(prompts: readonly string[], run: SplitOutcome<unknown>, planned: number): void {
    // Nothing ran and nothing failed alone: what the first run left had expired by its turn (the
    // size may be at fault, or the model: nothing to learn either way).
    if (run.served === 0 && run.failed.length === 0) return;
    if (run.served === 0) {
      this.failedInARow++;
      for (const p of prompts) if (this.failedPrompts.size < 2) this.failedPrompts.add(p);
      return;
    }
    this.failedInARow = 0;
    this.failedPrompts.clear();
    if (run.whole) {
      if (prompts.length >= this.capSize && ++this.capRuns >= CAP_RUNS_TO_GROW)
        this.capAt(this.capSize * 2 >= planned ? Number.POSITIVE_INFINITY : this.capSize * 2);
    } else if (run.served + run.notRun.length + run.dropped.length === prompts.length) {
      this.capAt(run.largestRun);
    }
  }

  private capAt(size: number): void {
    this.capSize = Math.max(1, size);
    this.capRuns = 0;
  }
}
