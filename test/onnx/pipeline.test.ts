import { cpSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { inflateSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodePng, PNG_SIGNATURE } from "../../actors/diffusion/png.ts";
import { guidanceRows, guidedPrediction, OnnxDiffusionPipeline, vaeDecoderInput } from "../../services/onnx/pipeline.ts";
import { identityModel, maskedSd15TextEncoder, nanVaeDecoder, refinerUnet, type TinyModelDirs } from "../../tools/make-tiny-models.ts";
import { imagesOf, useTinyModels } from "../helpers/tiny-models.ts";
import { OnnxModel } from "../../services/onnx/runtime.ts";

const tiny = useTinyModels("pipeline");

/** What the ONNX generation backend passes in production: no `batchInvariant`. */
const threads = { intraOpNumThreads: 1 };

function checkPng(png: Uint8Array, width: number, height: number): void {
  expect([...png.subarray(0, 8)]).toEqual([...PNG_SIGNATURE]);
  const view = new DataView(png.buffer, png.byteOffset);
  expect(String.fromCharCode(...png.subarray(12, 16))).toBe("IHDR");
  expect([view.getUint32(16), view.getUint32(20), png[24], png[25]]).toEqual([width, height, 8, 2]);
  const idatLength = view.getUint32(33);
  expect(String.fromCharCode(...png.subarray(37, 41))).toBe("IDAT");
  expect(inflateSync(png.subarray(41, 41 + idatLength)).length).toBe((width * 3 + 1) * height);
}

const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

/** Largest per-byte difference between two PNGs' decoded pixels. */
function maxPixelDiff(a: Uint8Array, b: Uint8Array): number {
  const pa = decodePng(a).pixels;
  const pb = decodePng(b).pixels;
  let max = 0;
  for (let i = 0; i < pa.length; i++) max = Math.max(max, Math.abs(pa[i] - pb[i]));
  return max;
}

const batchInputs = [
  { prompt: "a photo of a cat", seed: 11 },
  { prompt: "hello, world!", seed: 12 },
  { prompt: "a photo of a cat", seed: 13 },
  { prompt: "", seed: 11 },
];

// `guided`: the UNet runs uncond + cond rows, so a single image is never a one-row call.
describe.each([
  ["SD 1.x, Euler, guidance 7.5", "sd15", { steps: 3 }, true],
  ["SD 1.x, Euler ancestral", "sd15", { steps: 3, scheduler: "EulerAncestralDiscreteScheduler" }, true],
  ["SD 1.x, DDIM", "sd15", { steps: 3, scheduler: "DDIMScheduler" }, true],
  ["turbo, 1 step, guidance 0", "turbo", { steps: 1, guidanceScale: 0 }, false],
  ["LCM, 4 steps, guidance embedded as timestep_cond", "lcm", { steps: 4, guidanceScale: 8 }, false],
  ["SDXL, Euler, guidance 5", "sdxl", { steps: 2, guidanceScale: 5 }, true],
  ["SD3, flow matching, guidance 4.5", "sd3", { steps: 3, guidanceScale: 4.5 }, true],
  ["SD3.5 turbo-like, flow matching, 4 steps, guidance 0", "sd3", { steps: 4, guidanceScale: 0 }, false],
] as const)("OnnxDiffusionPipeline %s", (_label, key, options, guided) => {
  let pipeline: OnnxDiffusionPipeline;
  beforeAll(async () => {
    pipeline = await OnnxDiffusionPipeline.load(tiny.dirs[key], { ...options, ...threads });
  });
  afterAll(() => pipeline.release());

  it("makes a valid 64×64 PNG", async () => {
    const [out] = await pipeline.generate([{ prompt: "a photo of a cat", seed: 7 }]);
    expect([out.width, out.height]).toEqual([64, 64]);
    checkPng(out.image, 64, 64);
    const pixels = decodePng(out.image).pixels;
    expect(new Set(pixels).size).toBeGreaterThan(16);
  });

  it("is deterministic per seed and differs across seeds", async () => {
    const [a] = await pipeline.generate([{ prompt: "a photo of a cat", seed: 1 }]);
    const [b] = await pipeline.generate([{ prompt: "a photo of a cat", seed: 1 }]);
    const [c] = await pipeline.generate([{ prompt: "a photo of a cat", seed: 2 }]);
    expect(same(a.image, b.image)).toBe(true);
    expect(same(a.image, c.image)).toBe(false);
  });

  // Production leaves batchInvariant off: an unguided single image is a one-row UNet call,
  // whose GEMM path may round differently (seen: 1 level on 1 pixel for LCM); 2 leaves room
  // for other CPUs' kernels.
  it("production settings: a batch of 4 matches single runs (bytewise when guided, within 2 levels otherwise)", async () => {
    const batch = await pipeline.generate(batchInputs);
    expect(batch).toHaveLength(4);
    // Bytewise when guided (a difference of 0), within 2 levels otherwise.
    const allowed = guided ? 0 : 2;
    for (let i = 0; i < batchInputs.length; i++) {
      const [single] = await pipeline.generate([batchInputs[i]]);
      expect(maxPixelDiff(batch[i].image, single.image)).toBeLessThanOrEqual(allowed);
      expect(same(batch[i].image, single.image) || !guided).toBe(true);
    }
  });

  it("batchInvariant: a batch of 4 equals four single runs byte for byte", async () => {
    const invariant = await OnnxDiffusionPipeline.load(tiny.dirs[key], { ...options, ...threads, batchInvariant: true });
    try {
      const batch = await invariant.generate(batchInputs);
      for (let i = 0; i < batchInputs.length; i++) {
        const [single] = await invariant.generate([batchInputs[i]]);
        expect(same(batch[i].image, single.image)).toBe(true);
      }
    } finally {
      await invariant.release();
    }
  });
});

describe("OnnxDiffusionPipeline load-time validation", () => {
  function copyOf(key: keyof TinyModelDirs, name: string): string {
    const dir = join(tiny.root, name);
    cpSync(tiny.dirs[key], dir, { recursive: true });
    return dir;
  }

  it("names a missing model file", async () => {
    const dir = copyOf("sd15", "missing-unet");
    unlinkSync(join(dir, "unet", "model.onnx"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/unet[/\\]model\.onnx: missing model file/);
  });

  it("names a missing tokenizer or config file", async () => {
    const dir = copyOf("sd15", "missing-merges");
    unlinkSync(join(dir, "tokenizer", "merges.txt"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/tokenizer[/\\]merges\.txt: missing file/);
    const dir2 = copyOf("sd15", "missing-scheduler");
    unlinkSync(join(dir2, "scheduler", "scheduler_config.json"));
    await expect(OnnxDiffusionPipeline.load(dir2)).rejects.toThrow(/scheduler_config\.json: missing file/);
  });

  it("names a wrong input name", async () => {
    const dir = copyOf("sd15", "wrong-input");
    writeFileSync(join(dir, "unet", "model.onnx"), identityModel("latents", ["batch", 4, "h", "w"], "out_sample"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/unet[/\\]model\.onnx: missing input "sample"/);
  });

  it("names a rank mismatch", async () => {
    const dir = copyOf("sd15", "wrong-rank");
    writeFileSync(join(dir, "vae_decoder", "model.onnx"), identityModel("latent_sample", ["batch", 4, "h"], "sample"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /vae_decoder[/\\]model\.onnx: input "latent_sample" has rank 3 .*expected rank 4/,
    );
  });

  it("names a missing output", async () => {
    const dir = copyOf("sd15", "wrong-output");
    writeFileSync(join(dir, "vae_decoder", "model.onnx"), identityModel("latent_sample", ["batch", 4, "h", "w"], "image"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/vae_decoder[/\\]model\.onnx: missing output "sample"/);
  });

  it("the tiny UNets cover both timestep layouts the pipelines above run: scalar float (current Optimum exports) and rank 1", async () => {
    const layout = async (key: keyof TinyModelDirs) => {
      const unet = await OnnxModel.open(join(tiny.dirs[key], "unet", "model.onnx"));
      const info = unet.input("timestep");
      await unet.release();
      return [info?.type, info?.shape.length];
    };
    expect(await layout("sd15")).toEqual(["float32", 0]);
    expect(await layout("lcm")).toEqual(["float32", 0]);
    expect(await layout("turbo")).toEqual(["float32", 1]);
    expect(await layout("sdxl")).toEqual(["int64", 1]);
  });

  it("refuses an SDXL refiner's UNet (time_ids of 5, with an aesthetic score) naming what is made", async () => {
    const dir = copyOf("sdxl", "sdxl-refiner");
    writeFileSync(join(dir, "unet", "model.onnx"), refinerUnet());
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /unet[/\\]model\.onnx: input "time_ids" has 5 values; only the SDXL base model's 6/,
    );
  });

  it("refuses an SDXL text encoder without hidden_states outputs instead of conditioning on the wrong layer", async () => {
    const dir = copyOf("sdxl", "sdxl-no-hidden-states");
    // SD 1.x's encoder: last_hidden_state only, as an export made without output_hidden_states.
    cpSync(join(tiny.dirs.sd15, "text_encoder", "model.onnx"), join(dir, "text_encoder", "model.onnx"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /text_encoder[/\\]model\.onnx: an SDXL or SD3 text encoder needs its hidden_states\.N outputs/,
    );
  });

  it("says a transformer/ export that is not SD3's (Flux, PixArt) is not supported instead of only a missing unet", async () => {
    const dir = copyOf("sd15", "transformer-layout");
    renameSync(join(dir, "unet"), join(dir, "transformer"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /unet[/\\]model\.onnx: missing model file; .* transformer\/ denoiser but is not an SD3 export .*only SD3\/SD3\.5 are supported \(not Flux or PixArt\)/,
    );
  });

  it("a VAE whose image is NaN fails the batch, naming the file, rather than making a black PNG", async () => {
    const dir = copyOf("sd15", "nan-vae");
    writeFileSync(join(dir, "vae_decoder", "model.onnx"), nanVaeDecoder());
    const broken = await OnnxDiffusionPipeline.load(dir);
    try {
      await expect(broken.generate([{ prompt: "a photo of a cat", seed: 1 }])).rejects.toThrow(
        /vae_decoder[/\\]model\.onnx: output "sample" hold NaN \(at 0 of 12288\)/,
      );
    } finally {
      await broken.release();
    }
  });

  it("names an unsupported scheduler class against scheduler_config.json", async () => {
    const dir = copyOf("sd3", "heun-scheduler");
    writeFileSync(
      join(dir, "scheduler", "scheduler_config.json"),
      JSON.stringify({ _class_name: "FlowMatchHeunDiscreteScheduler", num_train_timesteps: 1000, shift: 3 }),
    );
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /scheduler_config\.json: scheduler: unsupported scheduler class "FlowMatchHeunDiscreteScheduler"; supported: .*only FlowMatchEulerDiscreteScheduler \(SD3, SD3\.5\)/,
    );
  });

  it("refuses a flow-matching scheduler for a UNet model, and any other for an SD3 transformer, naming the file", async () => {
    const unet = copyOf("sd15", "unet-flow-scheduler");
    cpSync(join(tiny.dirs.sd3, "scheduler", "scheduler_config.json"), join(unet, "scheduler", "scheduler_config.json"));
    await expect(OnnxDiffusionPipeline.load(unet)).rejects.toThrow(
      /scheduler_config\.json: scheduler FlowMatchEulerDiscreteScheduler does not fit a UNet model/,
    );
    const sd3 = copyOf("sd3", "sd3-euler-scheduler");
    cpSync(join(tiny.dirs.sd15, "scheduler", "scheduler_config.json"), join(sd3, "scheduler", "scheduler_config.json"));
    await expect(OnnxDiffusionPipeline.load(sd3)).rejects.toThrow(
      /scheduler EulerDiscreteScheduler does not fit a flow-matching \(SD3\) transformer, which needs FlowMatchEulerDiscreteScheduler/,
    );
    await expect(OnnxDiffusionPipeline.load(tiny.dirs.sd3, { scheduler: "DDIMScheduler" })).rejects.toThrow(/does not fit a flow-matching/);
  });

  it("names an SDXL encoder without pooled text_embeds", async () => {
    const dir = copyOf("sdxl", "xl-no-pooled");
    cpSync(join(tiny.dirs.sdxl, "text_encoder", "model.onnx"), join(dir, "text_encoder_2", "model.onnx"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/text_encoder_2[/\\]model\.onnx: missing output "text_embeds"/);
  });
});

describe("OnnxDiffusionPipeline text encoder mask", () => {
  it("runs an encoder that takes attention_mask without masking (as diffusers): the image is the mask-less encoder's", async () => {
    const dir = join(tiny.root, "sd15-masked-encoder");
    cpSync(tiny.dirs.sd15, dir, { recursive: true });
    writeFileSync(join(dir, "text_encoder", "model.onnx"), maskedSd15TextEncoder());
    const cat = [{ prompt: "a photo of a cat", seed: 4 }];
    const [a] = await imagesOf(dir, { steps: 2, ...threads }, cat);
    const [b] = await imagesOf(tiny.dirs.sd15, { steps: 2, ...threads }, cat);
    expect(same(a.image, b.image)).toBe(true);
  });
});

describe("OnnxDiffusionPipeline guidance embedding", () => {
  it("feeds the guidance scale to an LCM UNet through timestep_cond", async () => {
    const cat = [{ prompt: "a photo of a cat", seed: 5 }];
    const [a] = await imagesOf(tiny.dirs.lcm, { steps: 2, guidanceScale: 2, ...threads }, cat);
    const [b] = await imagesOf(tiny.dirs.lcm, { steps: 2, guidanceScale: 8, ...threads }, cat);
    expect(same(a.image, b.image)).toBe(false);
  });
});

describe("OnnxDiffusionPipeline SDXL negative prompt", () => {
  it("encodes an explicit empty negative prompt; only an unset one gives zero embeddings", async () => {
    const options = { steps: 2, guidanceScale: 5, ...threads };
    const cat = [{ prompt: "a photo of a cat", seed: 5 }];
    const [a] = await imagesOf(tiny.dirs.sdxl, options, cat);
    const [b] = await imagesOf(tiny.dirs.sdxl, { ...options, negativePrompt: "" }, cat);
    expect(same(a.image, b.image)).toBe(false);
  });
});

describe("guidance and VAE scaling helpers", () => {
  it("guidance rows are uncond × b then cond, and the output halves combine as uncond + s · (cond − uncond)", () => {
    const uncond = Float32Array.of(1, 2);
    const cond = Float32Array.of(3, 2, 5, 6); // two images, two values each
    const rows = guidanceRows(uncond, cond, 2);
    expect([...rows]).toEqual([1, 2, 1, 2, 3, 2, 5, 6]);
    // A UNet that returns its input shows the two helpers agree on which half is which:
    // image 0: 1 + 7.5·(3 − 1) = 16, 2 + 0 = 2; image 1: 1 + 7.5·(5 − 1) = 31, 2 + 7.5·(6 − 2) = 32.
    expect([...guidedPrediction(rows, 7.5)]).toEqual([16, 2, 31, 32]);
  });

  it("divides latents by the VAE scaling factor before decoding", () => {
    const out = vaeDecoderInput(Float32Array.of(0.18215, -0.3643, 0), 0.18215);
    expect(out[0]).toBeCloseTo(1, 6);
    expect(out[1]).toBeCloseTo(-2, 6);
    expect(out[2]).toBe(0);
  });
});
