/**
 * The ONNX backends the services run: each in a worker thread of its own (`OnnxThread`), so
 * inference never blocks the service's event loop. Same interfaces and errors as the
 * in-process `OnnxGenerationBackend` and `OnnxClipJudge`, which run inside the threads.
 */
import type { GeneratedImage, GenerationBackend, GenerationInput, JudgeBackend, JudgeInput } from "../../actors/worker/backend.ts";
import type { OnnxClipJudgeOptions } from "./clip-judge.ts";
import { JUDGE_MAX_BATCH } from "../../actors/judge/judge-queue.ts";
import type { OnnxGenerationBackendOptions } from "./generation-backend.ts";
import { ScoreWindows } from "./score-windows.ts";
import { OnnxThread } from "./thread-client.ts";

/**
 * Longest a load (warm-up included) or a batch may run in the thread before it is taken for hung:
 * the call fails as a generation failure, the thread is left to finish, and calls fail at once
 * until it has (see `OnnxThread`). Generous: a 1024² batch of a large model on a CPU takes minutes.
 */
export interface ThreadTimeouts {
  loadMs?: number;
  generateMs?: number;
}
const DEFAULT_THREAD_TIMEOUT_MS = 600_000;

/** `OnnxGenerationBackend` in a worker thread (one per worker, as each worker is one GPU). */
export class ThreadedGenerationBackend implements GenerationBackend {
  readonly kind = "onnx";
  /** Models loaded in the thread, least recently used first: what a restarted thread loads again. */
  private readonly loaded = new Set<string>();
  private readonly thread: OnnxThread;
  private readonly loadMs: number;
  private readonly generateMs: number;

  constructor(
    private readonly options: OnnxGenerationBackendOptions,
    timeouts: ThreadTimeouts = {},
  ) {
    this.loadMs = timeouts.loadMs ?? DEFAULT_THREAD_TIMEOUT_MS;
    this.generateMs = timeouts.generateMs ?? DEFAULT_THREAD_TIMEOUT_MS;
    this.thread = new OnnxThread({ kind: "generation", options }, "generation_failed", async (send) => {
      for (const model of [...this.loaded]) await send("load", [model], this.loadMs);
    });
  }

  async load(model: string): Promise<void> {
    await this.thread.call("load", [model], this.loadMs);
    this.loaded.delete(model);
    this.loaded.add(model);
    // The thread unloads its least recently used pipeline to stay within maxResident.
    for (const oldest of this.loaded) {
      if (this.loaded.size <= (this.options.maxResident ?? 1)) break;
      this.loaded.delete(oldest);
    }
  }

  async unload(model: string): Promise<void> {
    // A thread that died holds nothing: starting it again would first reload this very model (and
    // a model that no longer loads would keep the worker from ever swapping away from it).
    if (!this.thread.running) {
      this.loaded.delete(model);
      return;
    }
    await this.thread.call("unload", [model]);
    this.loaded.delete(model);
  }

  async generate(model: string, batch: readonly GenerationInput[]): Promise<GeneratedImage[]> {
    const images = await this.thread.call<GeneratedImage[]>("generate", [model, batch], this.generateMs);
    this.loaded.delete(model);
    this.loaded.add(model);
    return images;
  }

  close(): Promise<void> {
    this.loaded.clear();
    return this.thread.close();
  }
}

/** `OnnxClipJudge` in a worker thread; thresholds come from the scores it returned. */
export class ThreadedClipJudge implements JudgeBackend {
  readonly kind = "onnx-clip";
  // The thread scores one batch after another.
  readonly concurrency = 1;
  readonly maxBatch = JUDGE_MAX_BATCH;
  private readonly windows: ScoreWindows;

  private constructor(
    private readonly thread: OnnxThread,
    windowSize: number,
    private readonly scoreTimeoutMs: number,
  ) {
    this.windows = new ScoreWindows(windowSize);
  }

  /**
   * Starts the thread and loads the judge there; rejects with the load's error (naming the file).
   * A batch the thread runs for `scoreTimeoutMs` (default 2 minutes; waiting behind others does not
   * count) fails as `judge_failed`, as does every call until that thread has finished (see `OnnxThread`).
   */
  static async load(options: OnnxClipJudgeOptions, scoreTimeoutMs = 120_000): Promise<ThreadedClipJudge> {
    const thread = new OnnxThread({ kind: "judge", options }, "judge_failed");
    await thread.start();
    return new ThreadedClipJudge(thread, options.windowSize ?? 1000, scoreTimeoutMs);
  }

  async score(batch: readonly JudgeInput[]): Promise<number[]> {
    if (batch.length === 0) return [];
    const scores = await this.thread.call<number[]>("score", [batch], this.scoreTimeoutMs);
    batch.forEach((input, i) => this.windows.record(input.model, scores[i]));
    return scores;
  }

  thresholdFor(model: string, share: number): number {
    return this.windows.thresholdFor(model, share);
  }

  close(): Promise<void> {
    return this.thread.close();
  }
}
