/**
 * The parts of an SD3/SD3.5 export (optimum/diffusers layout) that differ from a UNet pipeline's:
 * three text encoders (CLIP-L and CLIP-G with projection, T5) whose outputs join into one
 * sequence, and a `transformer/` denoiser that takes latents of 16 channels and the pooled CLIP
 * embeddings. `pipeline.ts` runs the loop (flow-matching Euler) and the VAE.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CLIP_EOS_TOKEN } from "../../actors/diffusion/tokenizer.ts";
import type { UnigramTokenizer } from "../../actors/diffusion/unigram.ts";
import type { OnnxModel } from "./runtime.ts";
import type { Denoiser, TextConditioning } from "./denoiser.ts";
import {
  declaredWidth,
  readJson,
  readT5Tokenizer,
  readTokenizer,
  sideBySide,
  TEXT_INPUTS,
  tokenFeeds,
  type TextTokenizer,
} from "./text-inputs.ts";
import { ModelExportError } from "../../contracts/errors.ts";

/** T5 tokens SD3 reads (diffusers' `max_sequence_length` default). */
export const SD3_T5_TOKENS = 256;
/** CLIP tokens per prompt, and the length of the zero T5 sequence when an export has no T5. */
const CLIP_TOKENS = 77;

/**
 * True when `dir` is an SD3-layout export: no UNet, and model_index.json names an SD3 pipeline or
 * a third text encoder or tokenizer (a missing `transformer/` is then reported as missing).
 */
export function isSd3Export(dir: string, index: Record<string, unknown>): boolean {
  if (existsSync(join(dir, "unet", "model.onnx"))) return false;
  return /StableDiffusion3/.test(String(index._class_name ?? "")) || "text_encoder_3" in index || "tokenizer_3" in index;
}

/** A model_index.json component entry that names a model (`[library, class]`), not `[null, null]` (diffusers' "none"). */
const names = (entry: unknown) => Array.isArray(entry) && entry.some((x) => x !== null);

/** SD3's tokenizers: the two CLIP ones, and T5's when the export has a T5 encoder. */
export interface Sd3Tokenizers {
  dir: string;
  clip: [TextTokenizer, TextTokenizer];
  t5: UnigramTokenizer | null;
}

/**
 * Reads the tokenizers (before any session opens: a bad one must not cost a model load). The T5
 * encoder is used when its model file is there or model_index.json names one (then a missing file
 * is an error, not a silent run without T5); only an index that lists it as `[null, null]`, or
 * not at all, with no file, runs on zeros in its place, as diffusers does.
 */
export function readSd3Tokenizers(dir: string, index: Record<string, unknown>): Sd3Tokenizers {
  const t5 = existsSync(join(dir, "text_encoder_3", "model.onnx")) || names(index.text_encoder_3);
  return {
    dir,
    clip: [readTokenizer(join(dir, "tokenizer"), CLIP_EOS_TOKEN), readTokenizer(join(dir, "tokenizer_2"), "!")],
    t5: t5 ? readT5Tokenizer(join(dir, "tokenizer_3"), SD3_T5_TOKENS) : null,
  };
}

/**
 * The joint text sequence of one prompt, as diffusers builds it: each CLIP encoder's penultimate
 * hidden states side by side (`[77, d1 + d2]`), padded with zeros to the T5 width, then the T5
 * states (`[T, width]`) after them; `[77 + T, width]` in all. Without a T5 its rows are zeros.
 */
export function jointSequence(
  clip: readonly { data: Float32Array; dim: number }[],
  t5: { data: Float32Array; rows: number } | { rows: number },
  width: number,
): Float32Array {
  const clipWidth = clip.reduce((s, c) => s + c.dim, 0);
  if (clipWidth > width) throw new ModelExportError(`SD3 text: the CLIP encoders' width ${clipWidth} exceeds the joint width ${width}`);
  const out = sideBySide(clip, CLIP_TOKENS, width, new Float32Array((CLIP_TOKENS + t5.rows) * width));
  if ("data" in t5) out.set(t5.data, CLIP_TOKENS * width);
  return out;
}

interface ClipEncoder {
  model: OnnxModel;
  tokenizer: TextTokenizer;
  hidden: string;
}

/** SD3's text side: encodes one prompt into the joint sequence and the pooled CLIP embeddings. */
export class Sd3Text {
  private constructor(
    private readonly clip: ClipEncoder[],
    private readonly t5: { model: OnnxModel; tokenizer: UnigramTokenizer } | null,
    readonly width: number,
  ) {}

  /**
   * Opens the encoders (`open` opens a component's model.onnx and owns it). `width` is the
   * transformer's `encoder_hidden_states` width (its `joint_attention_dim`).
   */
  static async open(
    open: (component: string) => Promise<OnnxModel>,
    tokenizers: Sd3Tokenizers,
    penultimate: (m: OnnxModel) => string,
    width: number,
  ): Promise<Sd3Text> {
    const clip: ClipEncoder[] = [];
    for (const [i, component] of (["text_encoder", "text_encoder_2"] as const).entries()) {
      const model = await open(component);
      model.validate(TEXT_INPUTS, [
        { name: "text_embeds", rank: 2 },
        { name: "last_hidden_state", rank: 3 },
      ]);
      clip.push({ model, tokenizer: tokenizers.clip[i], hidden: penultimate(model) });
    }
    let t5: { model: OnnxModel; tokenizer: UnigramTokenizer } | null = null;
    if (tokenizers.t5) {
      const model = await open("text_encoder_3");
      model.validate(TEXT_INPUTS, [{ name: "last_hidden_state", rank: 3 }]);
      const t5Width = model.output("last_hidden_state")?.shape[2];
      if (typeof t5Width === "number" && t5Width !== width)
        throw new ModelExportError(
          `${model.file}: output "last_hidden_state" has width ${t5Width}; the transformer's encoder_hidden_states take ${width}`,
        );
      t5 = { model, tokenizer: tokenizers.t5 };
    }
    const clipWidth = declaredWidth(clip.map((c) => ({ model: c.model, output: c.hidden })));
    if (clipWidth !== undefined && clipWidth > width)
      throw new ModelExportError(
        `${join(tokenizers.dir, "transformer")}: encoder_hidden_states width ${width} is narrower than the CLIP encoders' ${clipWidth}`,
      );
    return new Sd3Text(clip, t5, width);
  }

  /** Pooled width: the two CLIP projections side by side (`pooled_projections`). */
  pooledWidth(): number | undefined {
    const dims = this.clip.map((c) => c.model.output("text_embeds")?.shape[1]);
    return dims.every((d) => typeof d === "number") ? (dims as number[]).reduce((a, b) => a + b, 0) : undefined;
  }

  /** The joint sequence `[1, 77 + T, width]` and pooled embeddings of one prompt. */
  async encode(prompt: string): Promise<TextConditioning> {
    const states: { data: Float32Array; dim: number }[] = [];
    const pooled: Float32Array[] = [];
    for (const c of this.clip) {
      // No mask, as diffusers' SD3 pipeline runs every text encoder.
      const result = await c.model.run(tokenFeeds(c.model, c.tokenizer, [prompt], "none"), [c.hidden, "text_embeds"]);
      states.push({ data: result[c.hidden].data, dim: result[c.hidden].dims[2] });
      pooled.push(result.text_embeds.data);
    }
    let t5: { data: Float32Array; rows: number } | { rows: number } = { rows: CLIP_TOKENS };
    if (this.t5) {
      const result = await this.t5.model.run(tokenFeeds(this.t5.model, this.t5.tokenizer, [prompt], "none"), ["last_hidden_state"]);
      const [, rows, dim] = result.last_hidden_state.dims;
      if (dim !== this.width)
        throw new ModelExportError(`${this.t5.model.file}: output "last_hidden_state" has width ${dim}, expected ${this.width}`);
      t5 = { data: result.last_hidden_state.data, rows };
    }
    const joined = new Float32Array(pooled.reduce((n, p) => n + p.length, 0));
    pooled.reduce((offset, p) => (joined.set(p, offset), offset + p.length), 0);
    return { hidden: jointSequence(states, t5, this.width), pooled: joined, dim: this.width };
  }
}

/** Opens and checks an SD3 transformer; a Flux-style one (`img_ids`, `txt_ids`, `guidance`) is refused by name. */
export async function openSd3Transformer(
  dir: string,
  open: (component: string) => Promise<OnnxModel>,
): Promise<{ denoiser: Denoiser; width: number; sampleSize: number }> {
  const model = await open("transformer");
  const flux = ["img_ids", "txt_ids", "guidance"].filter((n) => model.input(n) !== undefined);
  if (flux.length > 0)
    throw new ModelExportError(
      `${model.file}: inputs ${flux.join(", ")} make this a Flux-style transformer; only SD3/SD3.5 transformers are supported`,
    );
  const output = model.output("out_hidden_states") ? "out_hidden_states" : "out_sample";
  model.validate(
    [
      { name: "hidden_states", rank: 4 },
      { name: "encoder_hidden_states", rank: 3 },
      { name: "pooled_projections", rank: 2 },
      { name: "timestep", rank: model.input("timestep")?.shape.length === 0 ? 0 : 1 },
    ],
    [{ name: output, rank: 4 }],
  );
  const configFile = join(dir, "transformer", "config.json");
  const config = existsSync(configFile) ? readJson(configFile) : {};
  const width = model.input("encoder_hidden_states")?.shape[2] ?? config.joint_attention_dim;
  if (typeof width !== "number")
    throw new ModelExportError(
      `${model.file}: input "encoder_hidden_states" has no fixed width and ${configFile} names no joint_attention_dim`,
    );
  const fixedChannels = model.input("hidden_states")?.shape[1];
  const channels = typeof fixedChannels === "number" ? fixedChannels : typeof config.in_channels === "number" ? config.in_channels : 16;
  const fixedSide = model.input("hidden_states")?.shape[2];
  const sampleSize = typeof config.sample_size === "number" ? config.sample_size : typeof fixedSide === "number" ? fixedSide : 128;
  return {
    denoiser: { model, sample: "hidden_states", pooled: "pooled_projections", output, channels, timeIds: false },
    width,
    sampleSize,
  };
}
