import { cpSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inflateSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodePng, PNG_SIGNATURE } from "../../actors/diffusion/png.ts";
import { OnnxDiffusionPipeline } from "../../services/lib/onnx/pipeline.ts";
import { identityModel, makeTinyModels, type TinyModelDirs } from "../../tools/make-tiny-models.ts";

let root: string;
let dirs: TinyModelDirs;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "hadis-onnx-pipeline-"));
  dirs = makeTinyModels(join(root, "models"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const threads = { intraOpNumThreads: 1, batchInvariant: true };

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

describe.each([
  ["SD 1.x, Euler, guidance 7.5", "sd15", { steps: 3 }],
  ["SD 1.x, Euler ancestral", "sd15", { steps: 3, scheduler: "EulerAncestralDiscreteScheduler" }],
  ["SD 1.x, DDIM", "sd15", { steps: 3, scheduler: "DDIMScheduler" }],
  ["turbo, 1 step, guidance 0", "turbo", { steps: 1, guidanceScale: 0 }],
  ["LCM, 4 steps, guidance embedded as timestep_cond", "lcm", { steps: 4, guidanceScale: 8 }],
  ["SDXL, Euler, guidance 5", "sdxl", { steps: 2, guidanceScale: 5 }],
] as const)("OnnxDiffusionPipeline %s", (_label, key, options) => {
  let pipeline: OnnxDiffusionPipeline;
  beforeAll(async () => {
    pipeline = await OnnxDiffusionPipeline.load(dirs[key], { ...options, ...threads });
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

  it("a batch of 4 equals four single runs byte for byte", async () => {
    const inputs = [
      { prompt: "a photo of a cat", seed: 11 },
      { prompt: "hello, world!", seed: 12 },
      { prompt: "a photo of a cat", seed: 13 },
      { prompt: "", seed: 11 },
    ];
    const batch = await pipeline.generate(inputs);
    expect(batch).toHaveLength(4);
    for (let i = 0; i < inputs.length; i++) {
      const [single] = await pipeline.generate([inputs[i]]);
      expect(same(batch[i].image, single.image)).toBe(true);
    }
  });
});

describe("OnnxDiffusionPipeline load-time validation", () => {
  function copyOf(key: keyof TinyModelDirs, name: string): string {
    const dir = join(root, name);
    cpSync(dirs[key], dir, { recursive: true });
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

  it("names an SDXL encoder without pooled text_embeds", async () => {
    const dir = copyOf("sdxl", "xl-no-pooled");
    cpSync(join(dirs.sdxl, "text_encoder", "model.onnx"), join(dir, "text_encoder_2", "model.onnx"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/text_encoder_2[/\\]model\.onnx: missing output "text_embeds"/);
  });
});

describe("OnnxDiffusionPipeline guidance embedding", () => {
  it("feeds the guidance scale to an LCM UNet through timestep_cond", async () => {
    const low = await OnnxDiffusionPipeline.load(dirs.lcm, { steps: 2, guidanceScale: 2, ...threads });
    const high = await OnnxDiffusionPipeline.load(dirs.lcm, { steps: 2, guidanceScale: 8, ...threads });
    const [a] = await low.generate([{ prompt: "a photo of a cat", seed: 5 }]);
    const [b] = await high.generate([{ prompt: "a photo of a cat", seed: 5 }]);
    expect(same(a.image, b.image)).toBe(false);
    await Promise.all([low.release(), high.release()]);
  });
});
