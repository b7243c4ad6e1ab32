/**
 * `GenerationBackend` over ONNX pipelines: model names map to export folders, at most
 * `maxResident` pipelines stay loaded (least recently used is unloaded first), each load
 * ends with a one-step warm-up run, and calls are serialised so that a load, an unload and
 * a batch never overlap on the shared CPU.
 */
import { HadisError, ConfigurationError } from "../../contracts/errors.ts";
import type { GeneratedImage, GenerationBackend, GenerationInput } from "../../actors/worker/backend.ts";
import { runInOptionGroups } from "../../actors/worker/option-groups.ts";
import { OnnxDiffusionPipeline, type PipelineOptions } from "./pipeline.ts";
import type { RuntimeOptions } from "./runtime.ts";

/** One servable model: its export folder and generation settings. */
export interface OnnxModelEntry extends PipelineOptions {
  dir: string;
}

/** Options for `OnnxGenerationBackend`. */
export interface OnnxGenerationBackendOptions extends RuntimeOptions {
  /** Model name → folder (or folder plus settings such as `steps`, `guidanceScale`). */
  models: Record<string, string | OnnxModelEntry>;
  /** Pipelines kept loaded at once (default 1). */
  maxResident?: number;
  /** Run one single-step image after loading so the first batch is warm (default true). */
  warmUp?: boolean;
}

/** Runs diffusion models from ONNX exports on this machine. */
export class OnnxGenerationBackend implements GenerationBackend {
  readonly kind = "onnx";
  private readonly resident = new Map<string, OnnxDiffusionPipeline>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: OnnxGenerationBackendOptions) {
    if ((options.maxResident ?? 1) < 1) throw new ConfigurationError("OnnxGenerationBackend: maxResident must be at least 1");
  }

  /** Names of loaded models, least recently used first. */
  get loadedModels(): string[] {
    return [...this.resident.keys()];
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private entry(model: string): OnnxModelEntry {
    const entry = this.options.models[model];
    if (entry === undefined) throw new HadisError("unknown_model", `onnx backend: unknown model "${model}"`, { model });
    const { models: _models, maxResident: _max, warmUp: _warm, ...runtime } = this.options;
    return typeof entry === "string" ? { ...runtime, dir: entry } : { ...runtime, ...entry };
  }

  load(model: string): Promise<void> {
    return this.serial(async () => {
      const existing = this.resident.get(model);
      if (existing) {
        this.resident.delete(model);
        this.resident.set(model, existing);
        return;
      }
      const entry = this.entry(model);
      const max = this.options.maxResident ?? 1;
      while (this.resident.size >= max) {
        const [oldest, pipeline] = this.resident.entries().next().value as [string, OnnxDiffusionPipeline];
        this.resident.delete(oldest);
        await pipeline.release();
      }
      const pipeline = await OnnxDiffusionPipeline.load(entry.dir, entry);
      try {
        if (this.options.warmUp ?? true) await pipeline.generate([{ prompt: "", seed: 0 }], { steps: 1 });
      } catch (err) {
        await pipeline.release();
        throw err;
      }
      this.resident.set(model, pipeline);
    });
  }

  unload(model: string): Promise<void> {
    return this.serial(async () => {
      const pipeline = this.resident.get(model);
      if (!pipeline) return;
      this.resident.delete(model);
      await pipeline.release();
    });
  }

  generate(model: string, batch: readonly GenerationInput[]): Promise<GeneratedImage[]> {
    return this.serial(async () => {
      const pipeline = this.resident.get(model);
      if (!pipeline) throw new HadisError("no_capacity", `onnx backend: model "${model}" is not loaded`, { model });
      this.resident.delete(model);
      this.resident.set(model, pipeline);
      // One denoiser run per distinct settings: a run takes one size, step count and guidance.
      return runInOptionGroups(batch, (options, part) => pipeline.generate(part, options));
    });
  }

  close(): Promise<void> {
    return this.serial(async () => {
      const pipelines = [...this.resident.values()];
      this.resident.clear();
      await Promise.all(pipelines.map((p) => p.release()));
    });
  }
}
