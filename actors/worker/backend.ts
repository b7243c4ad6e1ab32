/**
 * The two backend interfaces behind the worker and the discriminator. `profile` backends
 * emulate GPUs from measured profiles; `onnx` backends run real inference.
 */

import type { AppliedOptions, GenerationOptions } from "../../contracts/messages.ts";

/** One image to generate. */
export interface GenerationInput {
  prompt: string;
  seed: number;
  /** The caller's settings (absent: the model's own). */
  options?: GenerationOptions;
}

/** One generated image (PNG bytes). */
export interface GeneratedImage {
  image: Uint8Array;
  width: number;
  height: number;
  /** What the backend applied to make it (reported in the reply). */
  applied?: AppliedOptions;
}

/** A model executor on one GPU: holds loaded models and runs batches. */
export interface GenerationBackend {
  /** `profile` or `onnx`. */
  readonly kind: string;
  /** Loads a model so it can serve; resolves when ready (warm). */
  load(model: string): Promise<void>;
  /** Unloads a model and frees its memory. */
  unload(model: string): Promise<void>;
  /** Generates one image per input, in order, as one batch. */
  generate(model: string, batch: readonly GenerationInput[]): Promise<GeneratedImage[]>;
  /** Releases everything. */
  close(): Promise<void>;
  /** How long a batch of `n` of `model` will run, ms, when the backend knows (profiled ones do). */
  expectedMs?(model: string, n: number): number;
  /** Runs as the paper artifact's profile mode does (`latency`: its batch table and 10 ms of judging a batch; `swaps`: loads and unloads free). */
  artifact?: ArtifactBackendModes;
}

/** The artifact's worker-side mechanisms a backend follows (switched by the plan in force). */
export interface ArtifactBackendModes {
  latency: boolean;
  swaps: boolean;
}

/** One image to judge. */
export interface JudgeInput {
  prompt: string;
  /** The model that generated the image. */
  model: string;
  image: Uint8Array;
}

/** The discriminator's scorer: higher is better (P(real) in the reference design). */
export interface JudgeBackend {
  readonly kind: string;
  /**
   * Score calls worth running at once (default: no limit). The discriminator holds the rest in
   * its queue, where an image whose verdict is no longer awaited is dropped unscored: a judge on
   * one thread says 1, since calls past it would only wait in the thread, out of that queue's reach.
   */
  readonly concurrency?: number;
  /** Images the discriminator may put into one score call (default 1). */
  readonly maxBatch?: number;
  /** Scores a batch of images; one score in [0, 1] per input. */
  score(batch: readonly JudgeInput[]): Promise<number[]>;
  /**
   * The score threshold for a model at an escalation share `share` (0..1): images scoring
   * below it are escalated. Percentile of the model's score distribution, as the reference does.
   */
  thresholdFor(model: string, share: number): number;
  close(): Promise<void>;
}
