/**
 * The profile-driven generation backend: waits the profiled batch latency (scaled by the time
 * scale) and returns a placeholder PNG. Loading and unloading wait the profiled swap costs.
 */
import { HadisError } from "../../contracts/errors.ts";
import type { ModelProfile } from "../../contracts/profile.ts";
import type { AppliedOptions } from "../../contracts/messages.ts";
import { runInOptionGroups } from "./option-groups.ts";
import { batchLatencyMs } from "../profile/profile-set.ts";
import type { ArtifactBackendModes, GeneratedImage, GenerationBackend, GenerationInput } from "./backend.ts";
import { artifactExecMs } from "../artifact/runtimes.ts";
import { ARTIFACT_JUDGE_MS } from "../artifact/worker-rules.ts";
import { PLACEHOLDER_SIDE, placeholderPng } from "./placeholder-png.ts";

/** Options of the profile backend. */
export interface ProfileBackendOptions {
  models: ReadonlyMap<string, ModelProfile>;
  timeScale: number;
  sleep: (ms: number) => Promise<void>;
  /** Zero-latency mode for overhead benchmarks: no waiting at all. */
  zeroLatency?: boolean;
}

/** Emulates one GPU from profiles. */
export class ProfileGenerationBackend implements GenerationBackend {
  readonly kind = "profile";
  private readonly loaded = new Set<string>();
  /** The artifact's mechanisms in force (the worker sets them from the plan). */
  artifact: ArtifactBackendModes = { latency: false, swaps: false };
  constructor(private readonly options: ProfileBackendOptions) {}

  private profile(model: string): ModelProfile {
    const p = this.options.models.get(model);
    if (!p) throw new HadisError("unknown_model", `no profile for model "${model}"`);
    return p;
  }

  private async wait(ms: number): Promise<void> {
    if (!this.options.zeroLatency && ms > 0) await this.options.sleep(ms);
  }

  async load(model: string): Promise<void> {
    if (!this.artifact.swaps) await this.wait(this.profile(model).loadMs * this.options.timeScale);
    this.loaded.add(model);
  }

  async unload(model: string): Promise<void> {
    if (!this.loaded.delete(model)) return;
    if (!this.artifact.swaps) await this.wait(this.profile(model).unloadMs * this.options.timeScale);
  }

  /** The batch's runtime: the profile's, or the artifact's table (odd sizes interpolated or at batch 4). */
  expectedMs(model: string, n: number): number {
    const p = this.profile(model);
    return this.artifact.latency ? artifactExecMs(p, n, this.options.timeScale) : batchLatencyMs(p, n, this.options.timeScale);
  }

  /**
   * Waits the profiled latency of the batch, one sub-batch per distinct settings: scaled by asked
   * steps ÷ profiled steps where the profile allows it (`options.latencyScalesWithSteps`). The
   * placeholder has the asked size (the usual 16×16 without one); each image says what was applied.
   */
  async generate(model: string, batch: readonly GenerationInput[]): Promise<GeneratedImage[]> {
    if (!this.loaded.has(model)) throw new HadisError("generation_failed", `model "${model}" is not loaded`);
    const profile = this.profile(model);
    return runInOptionGroups(batch, async (options, part) => {
      const scaled = options?.steps !== undefined && profile.options?.latencyScalesWithSteps === true && profile.steps !== undefined;
      const factor = scaled ? options!.steps! / profile.steps! : 1;
      // Under the artifact's latency, every batch also sleeps its 10 ms of judging (wall time, unscaled).
      await this.wait(this.expectedMs(model, part.length) * factor + (this.artifact.latency ? ARTIFACT_JUDGE_MS : 0));
      const width = options?.width ?? PLACEHOLDER_SIDE;
      const height = options?.height ?? PLACEHOLDER_SIDE;
      const image = placeholderPng(model, width, height);
      const steps = scaled ? options!.steps : profile.steps;
      const applied: AppliedOptions = {
        ...(steps !== undefined ? { steps } : {}),
        ...(options?.guidanceScale !== undefined ? { guidanceScale: options.guidanceScale } : {}),
        width,
        height,
        negativePrompt: options?.negativePrompt !== undefined && profile.options?.negativePrompt === true,
        emulated: true,
      };
      return part.map(() => ({ image, width, height, applied }));
    });
  }

  async close(): Promise<void> {
    this.loaded.clear();
  }
}
