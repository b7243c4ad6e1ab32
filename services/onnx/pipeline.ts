/**
 * Text-to-image with ONNX models in the optimum/diffusers export layout: SD 1.x/2.x,
 * distilled few-step models (SD-Turbo, SDXS, LCM), SDXL, and SD3/SD3.5 (a `transformer/`
 * denoiser over three text encoders, flow matching; its text side in sd3.ts). Tokenize → text
 * encoder(s) → seeded latents → scheduler loop over the denoiser (with classifier-free guidance
 * when guidanceScale > 1) → VAE decoder → PNG. Deterministic for a seed; a guided batch gives the
 * same bytes as its images run one by one (an unguided one only with `batchInvariant`).
 * Other transformer exports (Flux, PixArt) are rejected at load.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { GeneratedImage, GenerationInput } from "../../actors/worker/backend.ts";
import type { AppliedOptions, GenerationOptions } from "../../contracts/messages.ts";
import { encodePng } from "../../actors/diffusion/png.ts";
import { vaeOutputToRgb } from "../../actors/diffusion/image.ts";
import { GaussianRng, combineGuidance, guidanceScaleEmbedding } from "../../actors/diffusion/rng.ts";
import { createScheduler, SchedulerKind, type SchedulerConfig } from "../../actors/diffusion/scheduler.ts";
import { CLIP_EOS_TOKEN, type ClipTokenizer } from "../../actors/diffusion/tokenizer.ts";
import { OnnxModel, type RuntimeOptions, type TensorData, type ValueSpec } from "./runtime.ts";
import { declaredWidth, readJson, readTokenizer, sideBySide, TEXT_INPUTS, tokenFeeds } from "./text-inputs.ts";
import { isSd3Export, openSd3Transformer, readSd3Tokenizers, Sd3Text } from "./sd3.ts";
import type { Denoiser, TextConditioning } from "./denoiser.ts";
import { ModelExportError } from "../../contracts/errors.ts";

/** Generation settings; the defaults are diffusers' (50 steps and guidance 7.5, SD3's 28 and 7; the denoiser's native size). */
export interface PipelineOptions extends RuntimeOptions {
  /** Denoising steps (default 50, SD3 28; 1–4 for turbo/LCM/SDXS models and SD3.5 large turbo). */
  steps?: number;
  /** Classifier-free guidance scale; ≤ 1 runs the denoiser once per step without guidance (default 7.5, SD3 7). */
  guidanceScale?: number;
  /** Output size in pixels, multiples of 8, of 16 for SD3 (default: the denoiser's `sample_size` · 8). */
  height?: number;
  width?: number;
  /** Scheduler to use instead of the one `scheduler_config.json` names. */
  scheduler?: SchedulerKind;
  /** Negative prompt for guidance; unset means "" (SD, SD3) or zero embeddings (SDXL, as diffusers). */
  negativePrompt?: string;
  /**
   * Make a batch byte-identical to its images run one by one, at the price of running a
   * single unguided image as two UNet rows (default false).
   */
  batchInvariant?: boolean;
}

/** What a loaded pipeline is. */
export interface PipelineInfo {
  dir: string;
  /** `sd` (one text encoder), `sdxl` (two, pooled embeds and time ids) or `sd3` (three, a transformer). */
  family: "sd" | "sdxl" | "sd3";
  steps: number;
  guidanceScale: number;
  height: number;
  width: number;
  scheduler: string;
}

interface Encoder {
  model: OnnxModel;
  tokenizer: ClipTokenizer;
  /** Output used as per-token embeddings (last or penultimate hidden state). */
  hiddenOutput: string;
  /** Pooled output (SDXL second encoder's `text_embeds`). */
  pooledOutput?: string;
}

/**
 * The deepest-but-one `hidden_states.N` output: SDXL conditions on each text encoder's
 * penultimate layer. An export without them (made without `output_hidden_states`) is refused:
 * `last_hidden_state` is the last layer after the final norm, and images made on it are wrong
 * without any error saying so.
 */
function penultimateOutput(model: OnnxModel): string {
  const layers = model.outputs
    .map((o) => /^hidden_states\.(\d+)$/.exec(o.name)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number);
  if (layers.length < 2) {
    throw new ModelExportError(
      `${model.file}: an SDXL or SD3 text encoder needs its hidden_states.N outputs (both condition on the penultimate layer); export it with output_hidden_states, as optimum's stable-diffusion-xl and stable-diffusion-3 exports do`,
    );
  }
  return `hidden_states.${Math.max(...layers) - 1}`;
}

function requireFloat(model: OnnxModel, name: string): void {
  const type = model.input(name)?.type;
  if (type && type !== "float32")
    throw new ModelExportError(`${model.file}: input "${name}" is ${type}; only float32 models are supported`);
}

function concat(parts: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/**
 * UNet input for classifier-free guidance: `b` copies of the unconditional row, then the `b`
 * conditional rows — the order `guidedPrediction` reads the UNet output back in.
 */
export function guidanceRows(uncond: Float32Array, cond: Float32Array, b: number): Float32Array {
  return concat([...Array.from({ length: b }, () => uncond), cond]);
}

/** Guided prediction from a UNet output over `guidanceRows` input (first half uncond, second cond). */
export function guidedPrediction(out: Float32Array, scale: number): Float32Array {
  const half = out.length / 2;
  return combineGuidance(out.subarray(0, half), out.subarray(half), scale);
}

/** VAE decoder input: latents divided by the VAE's `scaling_factor`, plus its `shift_factor` (SD3's), as diffusers decodes. */
export function vaeDecoderInput(latents: Float32Array, vaeScale: number, vaeShift = 0): Float32Array {
  return latents.map((v) => v / vaeScale + vaeShift);
}

/**
 * Rejects a transformer-denoiser export other than SD3's (Flux, PixArt: `transformer/`, no
 * `unet/`, no third text encoder) with a message that says so, instead of only "missing model
 * file" further on.
 */
function requireUnetLayout(dir: string): void {
  const unetFile = join(dir, "unet", "model.onnx");
  if (existsSync(unetFile) || !existsSync(join(dir, "transformer"))) return;
  throw new ModelExportError(
    `${unetFile}: missing model file; ${dir} has a transformer/ denoiser but is not an SD3 export (no text_encoder_3 or tokenizer_3, ` +
      "model_index.json not StableDiffusion3); of transformer exports only SD3/SD3.5 are supported (not Flux or PixArt)",
  );
}

/**
 * The scheduler kind for `steps`, with a config it cannot run reported against its file; a
 * flow-matching scheduler only for a flow-matching (SD3) model, and no other for one.
 */
function checkScheduler(file: string, config: SchedulerConfig, steps: number, flow: boolean, override?: SchedulerKind): string {
  let kind: string;
  try {
    kind = createScheduler(config, steps, override).kind;
  } catch (err) {
    throw new ModelExportError(`${file}: ${(err as Error).message}`, { cause: err });
  }
  if (flow !== (kind === SchedulerKind.FlowMatchEuler)) {
    throw new ModelExportError(
      `${file}: scheduler ${kind} does not fit a ${flow ? "flow-matching (SD3) transformer, which needs" : "UNet model, which cannot run"} ${SchedulerKind.FlowMatchEuler}`,
    );
  }
  return kind;
}

/** Per-token embeddings `[N, 77, D]` and pooled embeddings `[N, P]` (SDXL) from a UNet model's encoders. */
async function encodeWith(encoders: readonly Encoder[], prompts: readonly string[]): Promise<TextConditioning> {
  const perEncoder: { data: Float32Array; dim: number }[] = [];
  let pooled: Float32Array | undefined;
  const n = prompts.length;
  let seq = 0;
  for (const enc of encoders) {
    seq = enc.tokenizer.maxLength;
    // No mask, as diffusers' SD and SDXL pipelines run their text encoders.
    const feeds = tokenFeeds(enc.model, enc.tokenizer, prompts, "none");
    const outputs = [enc.hiddenOutput, ...(enc.pooledOutput ? [enc.pooledOutput] : [])];
    const result = await enc.model.run(feeds, outputs);
    const hidden = result[enc.hiddenOutput];
    perEncoder.push({ data: hidden.data, dim: hidden.dims[2] });
    if (enc.pooledOutput) pooled = result[enc.pooledOutput].data;
  }
  if (perEncoder.length === 1) return { hidden: perEncoder[0].data, pooled, dim: perEncoder[0].dim };
  const dim = perEncoder.reduce((s, e) => s + e.dim, 0);
  return { hidden: sideBySide(perEncoder, n * seq, dim), pooled, dim };
}

/** The VAE's `scaling_factor` and `shift_factor` (config.json, else the family's published values). */
function vaeFactors(dir: string, family: PipelineInfo["family"]): { scale: number; shift: number } {
  const file = join(dir, "vae_decoder", "config.json");
  const config = existsSync(file) ? readJson(file) : {};
  const defaults = { sd: [0.18215, 0], sdxl: [0.13025, 0], sd3: [1.5305, 0.0609] }[family];
  return {
    scale: typeof config.scaling_factor === "number" ? config.scaling_factor : defaults[0],
    shift: typeof config.shift_factor === "number" ? config.shift_factor : defaults[1],
  };
}

/** What a model family's loader opens: its text side, its denoiser, and the latent side (default size). */
interface ModelParts {
  encode: (prompt: string) => Promise<TextConditioning>;
  denoiser: Denoiser;
  sampleSize: number;
}

type Open = (component: string) => Promise<OnnxModel>;

/** SD 1.x/2.x and SDXL: CLIP text encoder(s) and a UNet. */
async function openUnetModel(dir: string, open: Open, xl: boolean): Promise<ModelParts> {
  const tokenizer = readTokenizer(join(dir, "tokenizer"), CLIP_EOS_TOKEN);
  const tokenizer2 = xl ? readTokenizer(join(dir, "tokenizer_2"), "!") : undefined;
  const encoders: Encoder[] = [];
  const te = await open("text_encoder");
  te.validate(TEXT_INPUTS, [{ name: "last_hidden_state", rank: 3 }]);
  encoders.push({ model: te, tokenizer, hiddenOutput: xl ? penultimateOutput(te) : "last_hidden_state" });
  if (xl && tokenizer2) {
    const te2 = await open("text_encoder_2");
    te2.validate(TEXT_INPUTS, [
      { name: "text_embeds", rank: 2 },
      { name: "last_hidden_state", rank: 3 },
    ]);
    encoders.push({ model: te2, tokenizer: tokenizer2, hiddenOutput: penultimateOutput(te2), pooledOutput: "text_embeds" });
  }
  const unet = await open("unet");
  const unetInputs: ValueSpec[] = [
    { name: "sample", rank: 4 },
    { name: "timestep", rank: unet.input("timestep")?.shape.length === 0 ? 0 : 1 },
    { name: "encoder_hidden_states", rank: 3 },
    { name: "timestep_cond", rank: 2, optional: true },
  ];
  if (xl) unetInputs.push({ name: "text_embeds", rank: 2 }, { name: "time_ids", rank: 2 });
  unet.validate(unetInputs, [{ name: "out_sample", rank: 4 }]);
  for (const name of ["sample", "encoder_hidden_states", "text_embeds", "time_ids"]) requireFloat(unet, name);
  const timeIds = unet.input("time_ids")?.shape[1];
  if (xl && typeof timeIds === "number" && timeIds !== 6) {
    // The refiner's time_ids carry an aesthetic score (5 values): not what the base model's conditioning makes.
    throw new ModelExportError(
      `${unet.file}: input "time_ids" has ${timeIds} values; only the SDXL base model's 6 (size, crop, target size) are made (the refiner's aesthetic-score conditioning is not supported)`,
    );
  }
  const crossDim = unet.input("encoder_hidden_states")?.shape[2];
  const textDim = declaredWidth(encoders.map((e) => ({ model: e.model, output: e.hiddenOutput })));
  if (typeof crossDim === "number" && textDim !== undefined && crossDim !== textDim) {
    throw new ModelExportError(`${unet.file}: input "encoder_hidden_states" has width ${crossDim}, text encoder(s) produce ${textDim}`);
  }
  const unetConfigFile = join(dir, "unet", "config.json");
  const unetConfig = existsSync(unetConfigFile) ? readJson(unetConfigFile) : {};
  const fixedSide = unet.input("sample")?.shape[2];
  const sampleSize =
    typeof unetConfig.sample_size === "number" ? unetConfig.sample_size : typeof fixedSide === "number" ? fixedSide : xl ? 128 : 64;
  return {
    encode: (prompt) => encodeWith(encoders, [prompt]),
    denoiser: { model: unet, sample: "sample", pooled: xl ? "text_embeds" : undefined, output: "out_sample", channels: 4, timeIds: xl },
    sampleSize,
  };
}

/** SD3/SD3.5: CLIP-L, CLIP-G and T5 (optional, as in diffusers) joined, and a transformer. */
async function openSd3(dir: string, index: Record<string, unknown>, open: Open): Promise<ModelParts> {
  // Tokenizers first: a bad one must not cost the transformer's load.
  const tokenizers = readSd3Tokenizers(dir, index);
  const { denoiser, width, sampleSize } = await openSd3Transformer(dir, open);
  for (const name of ["hidden_states", "encoder_hidden_states", "pooled_projections", "timestep"]) requireFloat(denoiser.model, name);
  const text = await Sd3Text.open(open, tokenizers, penultimateOutput, width);
  const pooledIn = denoiser.model.input("pooled_projections")?.shape[1];
  const pooledOut = text.pooledWidth();
  if (typeof pooledIn === "number" && pooledOut !== undefined && pooledIn !== pooledOut) {
    throw new ModelExportError(
      `${denoiser.model.file}: input "pooled_projections" has width ${pooledIn}, the CLIP encoders' text_embeds give ${pooledOut}`,
    );
  }
  return { encode: (prompt) => text.encode(prompt), denoiser, sampleSize };
}

/** A loaded ONNX diffusion pipeline; `release()` frees its sessions. */
export class OnnxDiffusionPipeline {
  private constructor(
    readonly info: PipelineInfo,
    /** One prompt's text conditioning. */
    private readonly encode: (prompt: string) => Promise<TextConditioning>,
    private readonly denoiser: Denoiser,
    private readonly vae: OnnxModel,
    private readonly sessions: readonly OnnxModel[],
    private readonly schedulerConfig: SchedulerConfig,
    private readonly options: PipelineOptions,
    private readonly vaeFactor: { scale: number; shift: number },
    private readonly zeroUncond: boolean,
  ) {}

  /** Loads and validates a model folder; errors name the offending file and mismatch. */
  static async load(dir: string, options: PipelineOptions = {}): Promise<OnnxDiffusionPipeline> {
    const index = readJson(join(dir, "model_index.json"));
    const sd3 = isSd3Export(dir, index);
    if (!sd3) requireUnetLayout(dir);
    const xl = !sd3 && ("text_encoder_2" in index || existsSync(join(dir, "text_encoder_2")));
    const family: PipelineInfo["family"] = sd3 ? "sd3" : xl ? "sdxl" : "sd";
    const schedulerFile = join(dir, "scheduler", "scheduler_config.json");
    const schedulerConfig = readJson(schedulerFile) as SchedulerConfig;
    const steps = options.steps ?? (sd3 ? 28 : 50);
    // Before any session opens: an unsupported scheduler must not cost a model load.
    const schedulerKind = checkScheduler(schedulerFile, schedulerConfig, steps, sd3, options.scheduler);
    const opened: OnnxModel[] = [];
    const open = async (component: string) => {
      const model = await OnnxModel.open(join(dir, component, "model.onnx"), options);
      opened.push(model);
      return model;
    };
    try {
      const { encode, denoiser, sampleSize } = sd3 ? await openSd3(dir, index, open) : await openUnetModel(dir, open, xl);
      const vae = await open("vae_decoder");
      vae.validate([{ name: "latent_sample", rank: 4 }], [{ name: "sample", rank: 4 }]);
      requireFloat(vae, "latent_sample");
      const vaeChannels = vae.input("latent_sample")?.shape[1];
      if (typeof vaeChannels === "number" && vaeChannels !== denoiser.channels) {
        throw new ModelExportError(
          `${vae.file}: input "latent_sample" has ${vaeChannels} channels; the denoiser makes ${denoiser.channels}`,
        );
      }
      const height = options.height ?? sampleSize * 8;
      const width = options.width ?? sampleSize * 8;
      // SD3's transformer cuts latents into 2×2 patches: sides in multiples of 16 pixels.
      const multiple = sd3 ? 16 : 8;
      if (height % multiple !== 0 || width % multiple !== 0)
        throw new ModelExportError(`${dir}: height and width must be multiples of ${multiple} (got ${height}×${width})`);
      const info: PipelineInfo = {
        dir,
        family,
        steps,
        guidanceScale: options.guidanceScale ?? (sd3 ? 7 : 7.5),
        height,
        width,
        scheduler: schedulerKind,
      };
      // As diffusers: zeros only when no negative prompt is given; an explicit "" is encoded (SD3 always encodes).
      const zeroUncond = xl && index.force_zeros_for_empty_prompt !== false && options.negativePrompt === undefined;
      return new OnnxDiffusionPipeline(
        info,
        encode,
        denoiser,
        vae,
        [...opened],
        schedulerConfig,
        options,
        vaeFactors(dir, family),
        zeroUncond,
      );
    } catch (err) {
      await Promise.all(opened.map((m) => m.release()));
      throw err;
    }
  }

  private timestepTensor(t: number, batch: number): TensorData {
    const info = this.denoiser.model.input("timestep");
    const rank0 = info?.shape.length === 0;
    const fixed = info?.shape[0];
    const count = rank0 ? 1 : typeof fixed === "number" ? fixed : batch;
    const dims = rank0 ? [] : [count];
    // Integer timestep inputs get the value truncated, as numpy's float → int cast does in diffusers.
    if (info?.type === "int64") return { type: "int64", data: new BigInt64Array(count).fill(BigInt(Math.trunc(t))), dims };
    if (info?.type === "int32") return { type: "int32", data: new Int32Array(count).fill(Math.trunc(t)), dims };
    return { type: "float32", data: new Float32Array(count).fill(t), dims };
  }

  /**
   * Generates one PNG per input, as one batch; `overrides` (a request's settings) replace the
   * configured steps, guidance, size and negative prompt for this call. Each image says what applied.
   */
  async generate(batch: readonly GenerationInput[], overrides: GenerationOptions = {}): Promise<GeneratedImage[]> {
    if (batch.length === 0) return [];
    const height = overrides.height ?? this.info.height;
    const width = overrides.width ?? this.info.width;
    const multiple = this.info.family === "sd3" ? 16 : 8;
    if (height % multiple !== 0 || width % multiple !== 0)
      throw new ModelExportError(`${this.info.dir}: height and width must be multiples of ${multiple} (got ${height}×${width})`);
    const steps = overrides.steps ?? this.info.steps;
    const guidance = overrides.guidanceScale ?? this.info.guidanceScale;
    const negativePrompt = overrides.negativePrompt ?? this.options.negativePrompt;
    const model = this.denoiser.model;
    const embedsGuidance = model.input("timestep_cond") !== undefined;
    const cfg = guidance > 1 && !embedsGuidance;
    const b = batch.length;
    const scheduler = createScheduler(this.schedulerConfig, steps, this.options.scheduler);

    // One prompt per text-encoder run: a batched GEMM may round differently from a single-row
    // one, and encoding is a small share of the cost, so this keeps batch == singles bytewise.
    const perPrompt = [];
    for (const x of batch) perPrompt.push(await this.encode(x.prompt));
    const cond = {
      hidden: concat(perPrompt.map((e) => e.hidden)),
      pooled: perPrompt[0].pooled ? concat(perPrompt.map((e) => e.pooled as Float32Array)) : undefined,
      dim: perPrompt[0].dim,
    };
    let hidden = cond.hidden;
    let pooled = cond.pooled;
    if (cfg) {
      const rowHidden = cond.hidden.length / b;
      const rowPooled = cond.pooled ? cond.pooled.length / b : 0;
      let uncondHidden: Float32Array = new Float32Array(rowHidden);
      let uncondPooled: Float32Array = new Float32Array(rowPooled);
      if (!this.zeroUncond || overrides.negativePrompt !== undefined) {
        const uncond = await this.encode(negativePrompt ?? "");
        uncondHidden = uncond.hidden;
        uncondPooled = uncond.pooled ?? uncondPooled;
      }
      hidden = guidanceRows(uncondHidden, cond.hidden, b);
      if (cond.pooled) pooled = guidanceRows(uncondPooled, cond.pooled, b);
    }
    const unetBatch = cfg ? 2 * b : b;
    const seq = hidden.length / (unetBatch * cond.dim);
    // A one-row denoiser call may take a different GEMM kernel than a multi-row one (MLAS has an
    // M = 1 path), so batchInvariant pads it to two rows and keeps the first.
    const padRows = (this.options.batchInvariant ?? false) && unetBatch === 1;
    const rows = padRows ? 2 : unetBatch;
    const pad = (a: Float32Array) => (padRows ? concat([a, a]) : a);
    const lh = height / 8;
    const lw = width / 8;
    const channels = this.denoiser.channels;
    const perImage = channels * lh * lw;
    const rngs = batch.map((x) => new GaussianRng(x.seed));
    let latents = concat(rngs.map((rng) => rng.normals(perImage, scheduler.initNoiseSigma)));
    const drawNoise = () => concat(rngs.map((rng) => rng.normals(perImage)));

    const fixedFeeds: Record<string, TensorData> = {
      encoder_hidden_states: { type: "float32", data: pad(hidden), dims: [rows, seq, cond.dim] },
    };
    if (pooled && this.denoiser.pooled)
      fixedFeeds[this.denoiser.pooled] = { type: "float32", data: pad(pooled), dims: [rows, pooled.length / unetBatch] };
    if (this.denoiser.timeIds) {
      const ids = [height, width, 0, 0, height, width];
      fixedFeeds.time_ids = { type: "float32", data: Float32Array.from({ length: rows * 6 }, (_, i) => ids[i % 6]), dims: [rows, 6] };
    }
    if (embedsGuidance) {
      const dim = model.input("timestep_cond")?.shape[1];
      if (typeof dim !== "number") throw new ModelExportError(`${model.file}: input "timestep_cond" needs a fixed width`);
      const row = guidanceScaleEmbedding(guidance, dim);
      fixedFeeds.timestep_cond = { type: "float32", data: concat(Array.from({ length: rows }, () => row)), dims: [rows, dim] };
    }

    for (let i = 0; i < scheduler.timesteps.length; i++) {
      const t = scheduler.timesteps[i];
      const scaled = scheduler.scaleModelInput(latents, i);
      const sample = cfg ? concat([scaled, scaled]) : scaled;
      const { sample: sampleName, output } = this.denoiser;
      const result = await model.run(
        {
          ...fixedFeeds,
          [sampleName]: { type: "float32", data: pad(sample), dims: [rows, channels, lh, lw] },
          timestep: this.timestepTensor(t, rows),
        },
        [output],
      );
      expectDims(model.file, output, result[output].dims, [rows, channels, lh, lw]);
      const out = padRows ? result[output].data.subarray(0, perImage) : result[output].data;
      const noisePred = cfg ? guidedPrediction(out, guidance) : out;
      latents = scheduler.step(noisePred, i, latents, drawNoise);
    }

    // A model that overflowed makes NaN: an error, not a black image (NaN reads as 0 in the PNG).
    expectFinite(model.file, "latents after the last step", latents);
    const decoded = await this.vae.run(
      {
        latent_sample: {
          type: "float32",
          data: vaeDecoderInput(latents, this.vaeFactor.scale, this.vaeFactor.shift),
          dims: [b, channels, lh, lw],
        },
      },
      ["sample"],
    );
    const [, imageChannels, outH, outW] = decoded.sample.dims;
    if (imageChannels !== 3) throw new ModelExportError(`${this.vae.file}: output "sample" has ${imageChannels} channels, expected 3`);
    expectDims(this.vae.file, "sample", decoded.sample.dims, [b, 3, outH, outW]);
    expectFinite(this.vae.file, 'output "sample"', decoded.sample.data);
    const applied: AppliedOptions = {
      steps,
      guidanceScale: guidance,
      width: outW,
      height: outH,
      negativePrompt: cfg && negativePrompt !== undefined,
    };
    return batch.map((_, k) => {
      const rgb = vaeOutputToRgb(decoded.sample.data, k, outH, outW);
      return { image: encodePng(rgb), width: outW, height: outH, applied };
    });
  }

  /** Releases every session. */
  async release(): Promise<void> {
    await Promise.all(this.sessions.map((m) => m.release()));
  }
}

/** Throws, naming the model file, unless an output has the dims the step needs (a short output would read as NaN). */
function expectDims(file: string, name: string, dims: readonly number[], want: readonly number[]): void {
  if (dims.length !== want.length || dims.some((d, i) => d !== want[i]))
    throw new ModelExportError(`${file}: output "${name}" has dims [${dims.join(", ")}], expected [${want.join(", ")}]`);
}

/** Throws, naming the model file, when values hold a NaN or an infinity. */
function expectFinite(file: string, what: string, values: Float32Array): void {
  for (let i = 0; i < values.length; i++)
    if (!Number.isFinite(values[i]))
      throw new ModelExportError(`${file}: ${what} hold ${Number.isNaN(values[i]) ? "NaN" : "an infinity"} (at ${i} of ${values.length})`);
}
