/**
 * The denoiser a pipeline drives and the text conditioning it feeds it: a UNet (SD, SDXL) or a
 * transformer (SD3, in sd3.ts). Apart from `pipeline.ts` so that the SD3 side names them without
 * importing the pipeline that imports it.
 */
import type { OnnxModel } from "./runtime.ts";

/** Per-token embeddings `[N, seq, dim]` (row-major) and pooled embeddings of prompts. */
export interface TextConditioning {
  hidden: Float32Array;
  pooled?: Float32Array;
  dim: number;
}

/** What the denoising loop feeds and reads: a UNet's input and output names, or a transformer's (sd3.ts). */
export interface Denoiser {
  model: OnnxModel;
  /** The latents' input. */
  sample: string;
  /** The pooled text embeddings' input (SDXL's `text_embeds`, SD3's `pooled_projections`). */
  pooled?: string;
  output: string;
  /** Latent channels (4 for SD and SDXL, 16 for SD3). */
  channels: number;
  /** SDXL's size conditioning (`time_ids`). */
  timeIds: boolean;
}
