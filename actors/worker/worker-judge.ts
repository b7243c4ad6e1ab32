/**
 * Judging where the image is: a worker that holds a judge scores the light images of a batch
 * right after it ran, against the threshold of the plan in force, and sends each verdict with its
 * image; the router then makes no judge call (a hop to the discriminator and the image's bytes
 * carried twice less per light request). Only items that ask (`wantsVerdict`) are judged, and
 * only under a plan at least as new as the one their router decided under; otherwise, or when the
 * judge fails, no verdict goes and the router asks the discriminator, as with a worker that holds none.
 */
import type { Plan, WorkerVerdict } from "../../contracts/messages.ts";
import { acceptsLight } from "../judge/verdict.ts";
import type { GeneratedImage, JudgeBackend } from "./backend.ts";
import type { BatchEntry, WorkerJudgement } from "./ports.ts";

/** An image with the worker's verdict on it, when it was judged here. */
export type JudgedImage = GeneratedImage & { verdict?: WorkerVerdict };

/** A worker's judge, following the plan's escalation share. */
export class WorkerJudge {
  private share = 0;
  private epoch = 0;

  constructor(
    readonly judge: JudgeBackend,
    private readonly now: () => number,
    private readonly log: (event: string, fields: Record<string, unknown>) => void,
  ) {}

  /** Takes the plan the worker applied: its share to escalate and its epoch. */
  follow(plan: Plan): void {
    this.share = plan.discThreshold;
    this.epoch = plan.epoch;
  }

  /**
   * `images` of `part` (made by `model`), with a verdict on each that asked for one and may be
   * judged here; `judged` hears of the verdicts given. Never rejects: a judge that fails costs
   * the verdicts (the router asks the discriminator), not the images.
   */
  async attach(
    model: string,
    part: readonly BatchEntry[],
    images: readonly GeneratedImage[],
    judged?: (judgement: WorkerJudgement) => void,
  ): Promise<JudgedImage[]> {
    // An item decided under a newer plan than this worker's would be judged by an older share: the discriminator waits for the plan.
    const wanted = part.flatMap((entry, i) =>
      entry.item.wantsVerdict && entry.item.stage === "light" && entry.item.planEpoch <= this.epoch ? [i] : [],
    );
    if (wanted.length === 0) return [...images];
    const { share, epoch } = this;
    const startedMs = this.now();
    let scores: number[];
    try {
      scores = await this.judge.score(wanted.map((i) => ({ prompt: part[i].item.prompt, model, image: images[i].image })));
      if (!Array.isArray(scores) || scores.length !== wanted.length)
        throw new Error(`the judge gave no score for each of ${wanted.length} images`);
    } catch (err) {
      this.log("worker.judge_failed", { model, images: wanted.length, error: (err as Error).message });
      return [...images];
    }
    const endedMs = this.now();
    const threshold = this.judge.thresholdFor(model, share);
    const out: JudgedImage[] = [...images];
    const verdicts = wanted.map((i, k) => {
      const verdict: WorkerVerdict = {
        score: scores[k],
        threshold,
        accept: acceptsLight(scores[k], threshold, share),
        planEpoch: epoch,
        judgeMs: Math.max(0, endedMs - startedMs),
      };
      out[i] = { ...images[i], verdict };
      return verdict;
    });
    judged?.({ entries: wanted.map((i) => part[i]), verdicts, startedMs, endedMs });
    return out;
  }
}
