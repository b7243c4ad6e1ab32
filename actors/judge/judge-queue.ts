/**
 * The discriminator's queue in front of its judge: at most `concurrency` score calls run at
 * once, each on up to `maxBatch` of the oldest waiting images. An image whose router has stopped
 * waiting for the verdict (`answerByMs` passed) when its turn comes is dropped unscored: a judge
 * slower than the light images coming would otherwise spend its time on verdicts nobody reads,
 * and reach the live ones later still. A batch that fails runs again in halves, so one bad image
 * fails alone.
 */
import { HadisError } from "../../contracts/errors.ts";
import { runSplitting } from "../worker/bisect.ts";
import type { JudgeInput } from "../worker/backend.ts";

/** Images a judge on one thread scores in one call (the usual CLIP exports have a dynamic batch axis). */
export const JUDGE_MAX_BATCH = 8;

/** How the queue runs its judge. */
export interface JudgeQueueOptions {
  /** Score calls at once (a judge on one thread gains nothing from more: they would wait there, past the queue's reach). */
  concurrency: number;
  /** Images per score call. */
  maxBatch: number;
  /** Epoch milliseconds now (the clock `answerByMs` is read by). */
  now: () => number;
  /** Images dropped unscored because their verdict was no longer awaited. */
  onExpired?: (n: number) => void;
}

interface Waiting {
  input: JudgeInput;
  answerByMs: number;
  resolve: (score: number) => void;
  reject: (err: unknown) => void;
}

/** The error of an image dropped unscored. */
export function verdictExpired(): HadisError {
  return new HadisError("deadline_exceeded", "the router stopped waiting for this verdict before the judge reached it");
}

/** Judge requests waiting for, and running on, one judge. */
export class JudgeQueue {
  private waiting: Waiting[] = [];
  private running = 0;
  private closedWith: Error | null = null;
  private readonly concurrency: number;
  private readonly maxBatch: number;

  constructor(
    private readonly score: (batch: readonly JudgeInput[]) => Promise<number[]>,
    private readonly opts: JudgeQueueOptions,
  ) {
    this.concurrency = Math.max(1, Math.floor(opts.concurrency) || 1);
    this.maxBatch = Math.max(1, Math.floor(opts.maxBatch) || 1);
  }

  /** Images waiting for a score call. */
  get queued(): number {
    return this.waiting.length;
  }

  /** The image's score; rejects with `deadline_exceeded` if `answerByMs` passes before its turn, or with the judge's error. */
  submit(input: JudgeInput, answerByMs = Infinity): Promise<number> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    return new Promise((resolve, reject) => {
      this.waiting.push({ input, answerByMs, resolve, reject });
      this.pump();
    });
  }

  /** Refuses what waits and what comes with `err`; the calls running finish. */
  close(err: Error): void {
    this.closedWith = err;
    for (const w of this.waiting.splice(0)) w.reject(err);
  }

  private pump(): void {
    while (this.running < this.concurrency && this.waiting.length > 0) {
      const batch = this.take();
      if (batch.length === 0) return;
      this.running++;
      void this.run(batch)
        .catch((err: unknown) => batch.forEach((w) => w.reject(err)))
        .finally(() => {
          this.running--;
          this.pump();
        });
    }
  }

  /** The oldest images still awaited, up to a batch; the expired ones before them are answered as such. */
  private take(): Waiting[] {
    const batch: Waiting[] = [];
    while (batch.length < this.maxBatch && this.waiting.length > 0)
      batch.push(...this.live(this.waiting.splice(0, this.maxBatch - batch.length)));
    return batch;
  }

  /** Of `items`, those still awaited; the others are answered as expired. */
  private live(items: readonly Waiting[]): Waiting[] {
    const now = this.opts.now();
    const keep = items.filter((w) => w.answerByMs > now);
    if (keep.length < items.length) {
      for (const w of items) if (w.answerByMs <= now) w.reject(verdictExpired());
      this.opts.onExpired?.(items.length - keep.length);
    }
    return keep;
  }

  private async run(batch: Waiting[]): Promise<void> {
    const outcome = await runSplitting(
      batch,
      async (part) => {
        try {
          const scores = await this.score(part.map((w) => w.input));
          if (!Array.isArray(scores) || scores.length !== part.length) {
            throw new Error(`the judge gave ${Array.isArray(scores) ? scores.length : "no"} scores for ${part.length} images`);
          }
          return { ok: true as const, results: scores };
        } catch (err) {
          return { ok: false as const, error: err as Error };
        }
      },
      {
        served: (part, scores) => part.forEach((w, i) => w.resolve(scores[i])),
        // Closed, a failed batch is not split further: what it held fails with it or is refused.
        stopped: () => this.closedWith !== null,
        keep: (part) => this.live(part),
      },
    );
    for (const { item, error } of outcome.failed) item.reject(error);
    for (const item of outcome.notRun) item.reject(this.closedWith);
  }
}
