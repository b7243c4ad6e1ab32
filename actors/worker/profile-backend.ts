/**
 * The profile-driven generation backend: waits the profiled batch latency (scaled by the time
 * scale) and returns a placeholder PNG. Loading and unloading wait the profiled swap costs.
 */
import { HadisError } from "../../contracts/errors.ts";
import type { ModelProfile } from "../../contracts/profile.ts";
import { batchLatencyMs } from "../profile/profile-set.ts";
import type { GeneratedImage, GenerationBackend, GenerationInput } from "./backend.ts";
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
    await this.wait(this.profile(model).loadMs * this.options.timeScale);
    this.loaded.add(model);
  }

  async unload(model: string): Promise<void> {
    if (!this.loaded.delete(model)) return;
    await this.wait(this.profile(model).unloadMs * this.options.timeScale);
  }

  async generate(model: string, batch: readonly GenerationInput[]): Promise<GeneratedImage[]> {
    if (!this.loaded.has(model)) throw new HadisError("generation_failed", `model "${model}" is not loaded`);
    await this.wait(batchLatencyMs(this.profile(model), batch.length, this.options.timeScale));
    const image = placeholderPng(model);
    return batch.map(() => ({ image, width: PLACEHOLDER_SIDE, height: PLACEHOLDER_SIDE }));
  }

  async close(): Promise<void> {
    this.loaded.clear();
  }
}
