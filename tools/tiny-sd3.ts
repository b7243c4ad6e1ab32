/**
 * A tiny SD3-layout export (optimum's StableDiffusion3 ONNX layout): CLIP-L and CLIP-G text
 * encoders with projection and `hidden_states.N`, a T5 encoder with a Unigram `tokenizer.json`,
 * a `transformer/` (`hidden_states`, `encoder_hidden_states`, `pooled_projections`, `timestep`
 * → `out_hidden_states`) over 16-channel latents, a VAE decoder with SD3's scaling and shift
 * factors, and a flow-matching Euler scheduler (shift 3).
 */
import { join } from "node:path";
import { METASPACE } from "../actors/diffusion/unigram.ts";
import { EMBED_ROWS, GraphBuilder, textEncoder, vaeDecoder, Weights, writeFile, writeTokenizer } from "./tiny-parts.ts";

/** Latent channels of SD3's VAE. */
const CHANNELS = 16;
/** CLIP tokens: the transformer's text sequence is these, then the T5 tokens. */
const CLIP_TOKENS = 77;

/**
 * A small Unigram vocabulary in T5's layout (`<pad>` 0, `</s>` 1, `<unk>` 2), with whole-word
 * pieces for a few prompts, sub-word pieces and single characters, scored so that the best
 * segmentation is not always the greedy longest match.
 */
export function tinyT5Vocab(): [string, number][] {
  const vocab: [string, number][] = [
    ["<pad>", 0],
    ["</s>", 0],
    ["<unk>", 0],
    [METASPACE, -3],
  ];
  const words = ["a", "photo", "of", "cat", "the", "red", "bicycle", "lighthouse", "at", "dusk", "dog"];
  for (const w of words) vocab.push([METASPACE + w, -4 - w.length / 10]);
  vocab.push(["light", -6], ["house", -6], [METASPACE + "light", -5], ["ing", -5], ["s", -4]);
  for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,.!?-'") vocab.push([c, -9]);
  return vocab;
}

/** A T5-like encoder: `input_ids` [B, S] (int64) → `last_hidden_state` [B, S, width]; no positions (T5's are relative). */
function t5Encoder(w: Weights, width: number): Uint8Array {
  const g = new GraphBuilder();
  const ids = g.input("input_ids", "int64", ["batch", "sequence"]);
  const idx = g.node("Mod", [ids, g.int([], [EMBED_ROWS])], undefined, { fmod: 0 });
  const emb = g.node("Gather", [g.float([EMBED_ROWS, width], w.tensor(EMBED_ROWS * width, 1)), idx], undefined, { axis: 0 });
  const mm = g.node("MatMul", [emb, g.float([width, width], w.tensor(width * width, 1 / Math.sqrt(width)))]);
  g.output(g.node("Tanh", [mm]), "last_hidden_state", "float32", ["batch", "sequence", width]);
  return g.encode("text_encoder_3");
}

/**
 * An SD3-like transformer: the latents convolved, plus the mean of the whole text sequence and,
 * apart, of its CLIP part (so the order of CLIP and T5 rows matters), the pooled projections and
 * the timestep, back to 16 channels.
 */
function transformer(w: Weights, width: number, pooled: number): Uint8Array {
  const g = new GraphBuilder();
  const C = 8;
  const hs = g.input("hidden_states", "float32", ["batch", CHANNELS, "height", "width"]);
  const ehs = g.input("encoder_hidden_states", "float32", ["batch", "sequence", width]);
  const pp = g.input("pooled_projections", "float32", ["batch", pooled]);
  const t = g.input("timestep", "float32", ["step"]);
  const toMap = (v: string) => g.node("Reshape", [v, g.int([4], [-1, C, 1, 1])]);
  const project = (v: string, n: number, scale: number) => toMap(g.node("MatMul", [v, g.float([n, C], w.tensor(n * C, scale))]));
  const conv = g.node(
    "Conv",
    [hs, g.float([C, CHANNELS, 3, 3], w.tensor(C * CHANNELS * 9, 0.15)), g.float([C], w.tensor(C, 0.1))],
    undefined,
    { pads: [1, 1, 1, 1] },
  );
  const textMean = g.node("ReduceMean", [ehs], undefined, { axes: [1], keepdims: 0 });
  const clipPart = g.node("Slice", [ehs, g.int([1], [0]), g.int([1], [CLIP_TOKENS]), g.int([1], [1])]);
  const clipMean = g.node("ReduceMean", [clipPart], undefined, { axes: [1], keepdims: 0 });
  const tCol = g.node("Reshape", [g.node("Mul", [t, g.float([], Float32Array.of(0.001))]), g.int([4], [-1, 1, 1, 1])]);
  const terms = [
    conv,
    project(textMean, width, 0.5),
    project(clipMean, width, 0.5),
    project(pp, pooled, 0.3),
    g.node("Sin", [g.node("Mul", [tCol, g.float([1, C, 1, 1], w.tensor(C, 3))])]),
  ];
  const sum = terms.slice(1).reduce((acc, term) => g.node("Add", [acc, term]), terms[0]);
  const out = g.node(
    "Conv",
    [g.node("Tanh", [sum]), g.float([CHANNELS, C, 3, 3], w.tensor(CHANNELS * C * 9, 0.2)), g.float([CHANNELS], w.tensor(CHANNELS, 0.05))],
    undefined,
    { pads: [1, 1, 1, 1] },
  );
  g.output(out, "out_hidden_states", "float32", ["batch", CHANNELS, "height", "width"]);
  return g.encode("transformer");
}

/** Writes the tiny SD3 export to `dir`: CLIP widths `hidden` and 1.5×, joint (T5) width 4×, latents `latent` a side. */
export function writeSd3(dir: string, w: Weights, hidden: number, latent: number): void {
  const d1 = hidden;
  const d2 = Math.round(hidden * 1.5);
  const width = 4 * hidden;
  const pooled = d1 + d2;
  writeFile(
    dir,
    "model_index.json",
    JSON.stringify(
      {
        _class_name: "ORTStableDiffusion3Pipeline",
        _diffusers_version: "0.31.0",
        scheduler: ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        text_encoder: ["optimum", "ORTModelTextEncoder"],
        text_encoder_2: ["optimum", "ORTModelTextEncoder"],
        text_encoder_3: ["optimum", "ORTModelTextEncoder"],
        tokenizer: ["transformers", "CLIPTokenizer"],
        tokenizer_2: ["transformers", "CLIPTokenizer"],
        tokenizer_3: ["transformers", "T5TokenizerFast"],
        transformer: ["optimum", "ORTModelTransformer"],
        vae_decoder: ["optimum", "ORTModelVaeDecoder"],
      },
      null,
      2,
    ),
  );
  writeFile(
    join(dir, "scheduler"),
    "scheduler_config.json",
    JSON.stringify({ _class_name: "FlowMatchEulerDiscreteScheduler", num_train_timesteps: 1000, shift: 3.0 }, null, 2),
  );
  writeFile(
    join(dir, "text_encoder"),
    "model.onnx",
    textEncoder(w, { idType: "int64", hidden: d1, layers: 2, hiddenStates: true, projection: d1 }),
  );
  writeTokenizer(join(dir, "tokenizer"), "<|endoftext|>");
  writeFile(
    join(dir, "text_encoder_2"),
    "model.onnx",
    textEncoder(w, { idType: "int64", hidden: d2, layers: 2, hiddenStates: true, projection: d2 }),
  );
  writeTokenizer(join(dir, "tokenizer_2"), "!");
  writeFile(join(dir, "text_encoder_3"), "model.onnx", t5Encoder(w, width));
  writeFile(
    join(dir, "tokenizer_3"),
    "tokenizer.json",
    JSON.stringify({
      version: "1.0",
      normalizer: { type: "Precompiled" },
      pre_tokenizer: { type: "Metaspace", replacement: METASPACE, prepend_scheme: "always", split: true },
      model: { type: "Unigram", unk_id: 2, vocab: tinyT5Vocab(), byte_fallback: false },
    }),
  );
  writeFile(
    join(dir, "tokenizer_3"),
    "tokenizer_config.json",
    JSON.stringify(
      { tokenizer_class: "T5Tokenizer", model_max_length: 512, eos_token: "</s>", pad_token: "<pad>", unk_token: "<unk>" },
      null,
      2,
    ),
  );
  writeFile(join(dir, "transformer"), "model.onnx", transformer(w, width, pooled));
  writeFile(
    join(dir, "transformer"),
    "config.json",
    JSON.stringify(
      {
        sample_size: latent,
        patch_size: 2,
        in_channels: CHANNELS,
        out_channels: CHANNELS,
        joint_attention_dim: width,
        pooled_projection_dim: pooled,
      },
      null,
      2,
    ),
  );
  writeFile(join(dir, "vae_decoder"), "model.onnx", vaeDecoder(w, CHANNELS));
  writeFile(
    join(dir, "vae_decoder"),
    "config.json",
    JSON.stringify({ scaling_factor: 1.5305, shift_factor: 0.0609, latent_channels: CHANNELS }, null, 2),
  );
}
