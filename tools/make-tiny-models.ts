/**
 * Builds TINY ONNX models with the folder layout, input and output names of real
 * optimum/diffusers exports (SD 1.x, a one-step turbo variant, an LCM variant, SDXL, SD3 in
 * tiny-sd3.ts, and a CLIP judge), so the ONNX pipeline runs end to end without downloadable
 * weights. The building blocks are in tiny-parts.ts.
 * Weights are deterministic from a seed; a full pipeline run takes milliseconds on CPU.
 *
 * The command `node --import tsx tools/make-tiny-models.ts [outDir] [--if-stale]` (compiled:
 * `node dist/tools/make-tiny-models.js …`; default outDir `tmp/tiny-models`) writes them into a
 * folder of its own and moves each into place, so a process reading them never reads a
 * half-written one; with `--if-stale` it does nothing when this generator already made every
 * folder there. The onnx backend runs it (`services/onnx/setup.ts`) when its model map names them.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DataType, GraphBuilder, textEncoder, textTower, vaeDecoder, Weights, writeFile, writeTokenizer, type Dim } from "./tiny-parts.ts";
import { writeSd3 } from "./tiny-sd3.ts";

export { tinyClipVocab } from "./tiny-parts.ts";

/** Options for `makeTinyModels`. */
export interface TinyModelOptions {
  /** Weight seed (default 1). */
  seed?: number;
  /** Text hidden size (default 8). */
  hiddenSize?: number;
  /** Latent side (default 8 → 64×64 images). */
  latentSize?: number;
}

/** Folders written by `makeTinyModels`. */
export interface TinyModelDirs {
  /** SD 1.x layout, Euler discrete (leading), int32 ids, scalar float timestep (as current Optimum exports). */
  sd15: string;
  /** SD-Turbo-like: SD 2.x tokenizer (`!` pad), Euler trailing, meant for 1 step, guidance 0; float timestep of rank 1. */
  turbo: string;
  /** SD 1.x layout with an LCM scheduler config and a `timestep_cond` (guidance embedding) UNet input; scalar timestep. */
  lcm: string;
  /** SDXL layout: two encoders, pooled `text_embeds`, `time_ids`, int64 timestep of rank 1 (older exports). */
  sdxl: string;
  /** SD3 layout: CLIP-L, CLIP-G and T5 encoders, a `transformer/` over 16-channel latents, flow-matching Euler (shift 3). */
  sd3: string;
  /** CLIP judge: image encoder, text encoder, P(real) head, tokenizer. */
  clip: string;
  /** CLIP judge as Optimum's single-file `clip` export: `model.onnx` and the tokenizer files side by side, plus our `head/`. */
  clipSingle: string;
}

interface UnetSpec {
  hidden: number;
  timestepType: "float32" | "int64";
  /** `timestep` a scalar (current Optimum exports: `"timestep": {}`) or rank 1 [steps] (older exports). */
  timestepRank: 0 | 1;
  /** SDXL added conditions: pooled text embedding size (and `time_ids` [B, timeIds]). */
  pooled?: number;
  /** Width of `time_ids` (default 6, the base model's; the refiner's is 5). */
  timeIds?: number;
  /** LCM guidance embedding width (`timestep_cond` [B, n]), as LCM-distilled UNets take. */
  timestepCond?: number;
}

function unet(w: Weights, spec: UnetSpec): Uint8Array {
  const g = new GraphBuilder();
  const C = 8;
  const D = spec.hidden;
  const sample = g.input("sample", "float32", ["batch", 4, "height", "width"]);
  let t = g.input("timestep", spec.timestepType, spec.timestepRank === 0 ? [] : ["steps"]);
  const ehs = g.input("encoder_hidden_states", "float32", ["batch", "sequence", D]);
  const conv1 = g.node("Conv", [sample, g.float([C, 4, 3, 3], w.tensor(C * 36, 0.3)), g.float([C], w.tensor(C, 0.1))], undefined, {
    pads: [1, 1, 1, 1],
  });
  const toMap = (v: string) => g.node("Reshape", [v, g.int([4], [-1, C, 1, 1])]);
  const ctx = g.node("ReduceMean", [ehs], undefined, { axes: [1], keepdims: 0 });
  const terms = [conv1, toMap(g.node("MatMul", [ctx, g.float([D, C], w.tensor(D * C, 0.5))]))];
  if (spec.timestepType !== "float32") t = g.node("Cast", [t], undefined, { to: DataType.FLOAT });
  const tCol = g.node("Reshape", [g.node("Mul", [t, g.float([], Float32Array.of(0.001))]), g.int([4], [-1, 1, 1, 1])]);
  terms.push(g.node("Sin", [g.node("Mul", [tCol, g.float([1, C, 1, 1], w.tensor(C, 3))])]));
  if (spec.pooled) {
    const P = spec.pooled;
    const textEmbeds = g.input("text_embeds", "float32", ["batch", P]);
    const T = spec.timeIds ?? 6;
    const timeIds = g.input("time_ids", "float32", ["batch", T]);
    terms.push(toMap(g.node("MatMul", [textEmbeds, g.float([P, C], w.tensor(P * C, 0.3))])));
    const scaledIds = g.node("Mul", [timeIds, g.float([], Float32Array.of(1 / 1024))]);
    terms.push(toMap(g.node("MatMul", [scaledIds, g.float([T, C], w.tensor(T * C, 0.5))])));
  }
  if (spec.timestepCond) {
    const n = spec.timestepCond;
    const cond = g.input("timestep_cond", "float32", ["batch", n]);
    terms.push(toMap(g.node("MatMul", [cond, g.float([n, C], w.tensor(n * C, 0.3))])));
  }
  const sum = terms.slice(1).reduce((acc, term) => g.node("Add", [acc, term]), terms[0]);
  const h = g.node("Tanh", [sum]);
  const out = g.node("Conv", [h, g.float([4, C, 3, 3], w.tensor(4 * C * 9, 0.2)), g.float([4], w.tensor(4, 0.05))], undefined, {
    pads: [1, 1, 1, 1],
  });
  g.output(out, "out_sample", "float32", ["batch", 4, "height", "width"]);
  return g.encode("unet");
}

function clipImageEncoder(w: Weights, embed: number): Uint8Array {
  const g = new GraphBuilder();
  imageTower(g, w, embed);
  return g.encode("image_encoder");
}

/** A CLIP-like image tower in `g`: `pixel_values` [B, 3, 224, 224] in, `image_embeds` [B, embed] out. */
function imageTower(g: GraphBuilder, w: Weights, embed: number): void {
  const px = g.input("pixel_values", "float32", ["batch", 3, 224, 224]);
  const pooled = g.node("AveragePool", [px], undefined, { kernel_shape: [28, 28], strides: [28, 28] });
  const flat = g.node("Flatten", [pooled], undefined, { axis: 1 });
  g.output(g.node("MatMul", [flat, g.float([192, embed], w.tensor(192 * embed, 0.2))]), "image_embeds", "float32", ["batch", embed]);
}

/**
 * A whole CLIP model in one file, as Optimum's `clip` export lays it out: `pixel_values`,
 * `input_ids` and `attention_mask` in; `image_embeds` and `text_embeds` (projected) out.
 */
function clipSingleFile(w: Weights, hidden: number, embed: number): Uint8Array {
  const g = new GraphBuilder();
  imageTower(g, w, embed);
  const ids = g.input("input_ids", "int64", ["batch", "sequence"]);
  g.input("attention_mask", "int64", ["batch", "sequence"]); // (the tiny tower reads every position)
  textTower(g, w, { idType: "int64", hidden, layers: 1, hiddenStates: false, projection: embed }, ids);
  return g.encode("clip");
}

function clipHead(w: Weights, embed: number): Uint8Array {
  const g = new GraphBuilder();
  const H = 16;
  const x = g.input("image_embeds", "float32", ["batch", embed]);
  const h = g.node("Relu", [
    g.node("Add", [g.node("MatMul", [x, g.float([embed, H], w.tensor(embed * H, 0.5))]), g.float([H], w.tensor(H, 0.1))]),
  ]);
  const logit = g.node("Add", [g.node("MatMul", [h, g.float([H, 1], w.tensor(H, 0.5))]), g.float([1], w.tensor(1, 0.1))]);
  g.output(g.node("Sigmoid", [logit]), "p_real", "float32", ["batch", 1]);
  return g.encode("head");
}

/**
 * The tiny SD 1.x export's text encoder (same weights) with an `attention_mask` input that zeroes
 * the masked rows of its output: fed no mask (all ones), it gives what the original gives.
 */
export function maskedSd15TextEncoder(seed = 1, hidden = 8): Uint8Array {
  return textEncoder(new Weights(seed), { idType: "int32", hidden, layers: 2, hiddenStates: false, maskInput: true });
}

/** An SDXL refiner-like UNet (`time_ids` of 5: sizes, crop and an aesthetic score) for the tiny SDXL export's text width. */
export function refinerUnet(hidden = 8): Uint8Array {
  return unet(new Weights(99), { hidden: 2 * hidden, timestepType: "int64", timestepRank: 1, pooled: 2 * hidden, timeIds: 5 });
}

/**
 * A VAE decoder of the usual layout (4-channel latents in, 3-channel image 8x larger out) whose
 * image is NaN everywhere, as a model that overflowed makes: for tests that such an image is an
 * error, not a black PNG.
 */
export function nanVaeDecoder(): Uint8Array {
  const g = new GraphBuilder();
  const z = g.input("latent_sample", "float32", ["batch", 4, "latent_height", "latent_width"]);
  const conv = g.node("Conv", [z, g.float([192, 4, 1, 1], new Float32Array(192 * 4).fill(0.1)), g.float([192], new Float32Array(192))]);
  const image = g.node("Tanh", [g.node("DepthToSpace", [conv], undefined, { blocksize: 8 })]);
  // tanh − 2 < 0 everywhere: its square root is NaN.
  g.output(g.node("Sqrt", [g.node("Sub", [image, g.float([1], new Float32Array([2]))])]), "sample", "float32", [
    "batch",
    3,
    "image_height",
    "image_width",
  ]);
  return g.encode("vae_decoder");
}

/** A CLIP judge head of the usual layout (`image_embeds` in, `p_real` out) that answers NaN, as an overflowed model would. */
export function nanClipHead(embed: number): Uint8Array {
  const g = new GraphBuilder();
  const x = g.input("image_embeds", "float32", ["batch", embed]);
  const zero = g.node("MatMul", [x, g.float([embed, 1], new Float32Array(embed))]);
  g.output(g.node("Sqrt", [g.node("Sub", [zero, g.float([1], new Float32Array([1]))])]), "p_real", "float32", ["batch", 1]);
  return g.encode("head");
}

/**
 * A one-node model (`Identity`) with the given input and output, for tests of load-time
 * validation (wrong names, wrong ranks).
 */
export function identityModel(inputName: string, dims: Dim[], outputName: string): Uint8Array {
  const g = new GraphBuilder();
  g.output(g.input(inputName, "float32", dims), outputName, "float32", dims);
  return g.encode("identity");
}

const SD_BETAS = { num_train_timesteps: 1000, beta_start: 0.00085, beta_end: 0.012, beta_schedule: "scaled_linear" };

interface SdSpec {
  dir: string;
  weights: Weights;
  hidden: number;
  latent: number;
  scheduler: Record<string, unknown>;
  padToken: string;
  xl: boolean;
  timestepCond?: number;
  /** Rank of the UNet's `timestep` input (see UnetSpec). */
  timestepRank: 0 | 1;
}

function writeSd(spec: SdSpec): void {
  const { dir, weights: w, hidden: D, latent } = spec;
  const components: Record<string, [string, string]> = {
    text_encoder: ["optimum", "ORTModelTextEncoder"],
    tokenizer: ["transformers", "CLIPTokenizer"],
    unet: ["optimum", "ORTModelUnet"],
    vae_decoder: ["optimum", "ORTModelVaeDecoder"],
    scheduler: ["diffusers", String(spec.scheduler._class_name)],
  };
  if (spec.xl) {
    components.text_encoder_2 = ["optimum", "ORTModelTextEncoder"];
    components.tokenizer_2 = ["transformers", "CLIPTokenizer"];
  }
  writeFile(
    dir,
    "model_index.json",
    JSON.stringify(
      {
        _class_name: spec.xl ? "ORTStableDiffusionXLPipeline" : "ORTStableDiffusionPipeline",
        _diffusers_version: "0.30.0",
        ...(spec.xl ? { force_zeros_for_empty_prompt: true } : {}),
        ...components,
      },
      null,
      2,
    ),
  );
  writeFile(join(dir, "scheduler"), "scheduler_config.json", JSON.stringify(spec.scheduler, null, 2));
  const idType = spec.xl ? "int64" : "int32";
  const pooled = spec.xl ? 2 * D : 0;
  writeFile(join(dir, "text_encoder"), "model.onnx", textEncoder(w, { idType, hidden: D, layers: 2, hiddenStates: spec.xl }));
  writeTokenizer(join(dir, "tokenizer"), spec.padToken);
  let crossDim = D;
  if (spec.xl) {
    writeFile(
      join(dir, "text_encoder_2"),
      "model.onnx",
      textEncoder(w, { idType, hidden: D, layers: 2, hiddenStates: true, projection: pooled }),
    );
    writeTokenizer(join(dir, "tokenizer_2"), "!");
    crossDim = 2 * D;
  }
  writeFile(
    join(dir, "unet"),
    "model.onnx",
    unet(w, {
      hidden: crossDim,
      timestepType: spec.xl ? "int64" : "float32",
      timestepRank: spec.timestepRank,
      pooled: spec.xl ? pooled : undefined,
      timestepCond: spec.timestepCond,
    }),
  );
  writeFile(
    join(dir, "unet"),
    "config.json",
    JSON.stringify({ sample_size: latent, in_channels: 4, out_channels: 4, cross_attention_dim: crossDim }, null, 2),
  );
  writeFile(join(dir, "vae_decoder"), "model.onnx", vaeDecoder(w, 4));
  writeFile(
    join(dir, "vae_decoder"),
    "config.json",
    JSON.stringify({ scaling_factor: spec.xl ? 0.13025 : 0.18215, latent_channels: 4 }, null, 2),
  );
}

/**
 * The generator's version, written beside the folders (`TINY_MODELS_STAMP`): raise it whenever
 * what `makeTinyModels` writes changes, so that folders an older one wrote are made again.
 */
export const TINY_MODELS_VERSION = 2;
/** The file that records which generator version wrote a folder of tiny models. */
export const TINY_MODELS_STAMP = "tiny-models.json";

/** Writes the tiny model folders under `outDir` (and the version stamp) and returns their paths. */
export function makeTinyModels(outDir: string, options: TinyModelOptions = {}): TinyModelDirs {
  const seed = options.seed ?? 1;
  const hidden = options.hiddenSize ?? 8;
  const latent = options.latentSize ?? 8;
  const dirs: TinyModelDirs = {
    sd15: join(outDir, "tiny-sd15"),
    turbo: join(outDir, "tiny-turbo"),
    lcm: join(outDir, "tiny-lcm"),
    sdxl: join(outDir, "tiny-sdxl"),
    sd3: join(outDir, "tiny-sd3"),
    clip: join(outDir, "tiny-clip-judge"),
    clipSingle: join(outDir, "tiny-clip-single"),
  };
  writeSd({
    dir: dirs.sd15,
    weights: new Weights(seed),
    hidden,
    latent,
    padToken: "<|endoftext|>",
    xl: false,
    timestepRank: 0,
    scheduler: {
      _class_name: "EulerDiscreteScheduler",
      ...SD_BETAS,
      prediction_type: "epsilon",
      timestep_spacing: "leading",
      steps_offset: 1,
    },
  });
  writeSd({
    dir: dirs.turbo,
    weights: new Weights(seed + 1),
    hidden,
    latent,
    padToken: "!",
    xl: false,
    timestepRank: 1,
    scheduler: {
      _class_name: "EulerDiscreteScheduler",
      ...SD_BETAS,
      prediction_type: "epsilon",
      timestep_spacing: "trailing",
      steps_offset: 1,
    },
  });
  writeSd({
    dir: dirs.lcm,
    weights: new Weights(seed + 2),
    hidden,
    latent,
    padToken: "<|endoftext|>",
    xl: false,
    timestepCond: 32,
    timestepRank: 0,
    scheduler: {
      _class_name: "LCMScheduler",
      ...SD_BETAS,
      prediction_type: "epsilon",
      original_inference_steps: 50,
      timestep_scaling: 10,
      set_alpha_to_one: true,
    },
  });
  writeSd({
    dir: dirs.sdxl,
    weights: new Weights(seed + 3),
    hidden,
    latent,
    padToken: "<|endoftext|>",
    xl: true,
    timestepRank: 1,
    scheduler: {
      _class_name: "EulerDiscreteScheduler",
      ...SD_BETAS,
      prediction_type: "epsilon",
      timestep_spacing: "leading",
      steps_offset: 1,
    },
  });
  writeSd3(dirs.sd3, new Weights(seed + 6), hidden, latent);
  const w = new Weights(seed + 4);
  const embed = 16;
  writeFile(join(dirs.clip, "image_encoder"), "model.onnx", clipImageEncoder(w, embed));
  writeFile(
    join(dirs.clip, "text_encoder"),
    "model.onnx",
    textEncoder(w, { idType: "int64", hidden, layers: 1, hiddenStates: false, projection: embed }),
  );
  writeFile(join(dirs.clip, "head"), "model.onnx", clipHead(w, embed));
  writeTokenizer(join(dirs.clip, "tokenizer"), "<|endoftext|>");
  const single = new Weights(seed + 5);
  writeFile(dirs.clipSingle, "model.onnx", clipSingleFile(single, hidden, embed));
  writeFile(join(dirs.clipSingle, "head"), "model.onnx", clipHead(single, embed));
  writeTokenizer(dirs.clipSingle, "<|endoftext|>");
  writeFile(outDir, TINY_MODELS_STAMP, JSON.stringify({ version: TINY_MODELS_VERSION, seed, hidden, latent }));
  return dirs;
}

/** The folders `makeTinyModels` writes, by name, each with a file that shows it is whole. */
const TINY_FOLDERS: Record<string, string> = {
  "tiny-sd15": "model_index.json",
  "tiny-turbo": "model_index.json",
  "tiny-lcm": "model_index.json",
  "tiny-sdxl": "model_index.json",
  "tiny-sd3": "model_index.json",
  "tiny-clip-judge": "head",
  "tiny-clip-single": "head",
};

/** True unless `dir` holds every tiny model folder, written by this generator version. */
export function tinyModelsStale(dir: string): boolean {
  if (Object.entries(TINY_FOLDERS).some(([folder, mark]) => !existsSync(join(dir, folder, mark)))) return true;
  try {
    return (JSON.parse(readFileSync(join(dir, TINY_MODELS_STAMP), "utf8")) as { version?: unknown }).version !== TINY_MODELS_VERSION;
  } catch {
    return true;
  }
}

/** Renames `from` to `to`; false when another process got there first (`to` exists, or `from` is gone). */
function renamed(from: string, to: string): boolean {
  try {
    renameSync(from, to);
    return true;
  } catch {
    return false;
  }
}

/**
 * Generates the tiny models into a folder of its own, then moves each into `base` (the stamp
 * last), so a process reading them (a service started on the same folder) never reads a
 * half-written file; two generating at once make the same bytes, and the last move wins.
 */
export function installTinyModels(base: string): TinyModelDirs {
  mkdirSync(base, { recursive: true });
  const fresh = mkdtempSync(join(base, ".tiny-"));
  try {
    const made = makeTinyModels(fresh);
    for (const name of readdirSync(fresh).filter((n) => n !== TINY_MODELS_STAMP)) {
      const target = join(base, name);
      const old = `${fresh}-old-${name}`;
      const moved = existsSync(target) && renamed(target, old);
      renamed(join(fresh, name), target);
      if (moved) rmSync(old, { recursive: true, force: true });
    }
    renameSync(join(fresh, TINY_MODELS_STAMP), join(base, TINY_MODELS_STAMP));
    return Object.fromEntries(
      Object.entries(made).map(([key, dir]) => [key, join(base, dir.slice(fresh.length + 1))]),
    ) as unknown as TinyModelDirs;
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const out = resolve(args.find((a) => !a.startsWith("--")) ?? "tmp/tiny-models");
  if (args.includes("--if-stale") && !tinyModelsStale(out)) process.exit(0);
  console.log(JSON.stringify(installTinyModels(out), null, 2));
}
