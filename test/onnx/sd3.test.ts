import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OnnxDiffusionPipeline, vaeDecoderInput } from "../../services/onnx/pipeline.ts";
import { jointSequence } from "../../services/onnx/sd3.ts";
import { METASPACE } from "../../actors/diffusion/unigram.ts";
import { identityModel } from "../../tools/make-tiny-models.ts";
import { imagesOf, useTinyModels } from "../helpers/tiny-models.ts";

const tiny = useTinyModels("sd3");
const threads = { intraOpNumThreads: 1 };
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

function copyOf(name: string): string {
  const dir = join(tiny.root, name);
  cpSync(tiny.dirs.sd3, dir, { recursive: true });
  return dir;
}

/** A copy without the T5 encoder and tokenizer, whose model_index.json lists them as `[null, null]` (diffusers' "none"). */
function withoutT5(name: string): string {
  const dir = copyOf(name);
  rmSync(join(dir, "text_encoder_3"), { recursive: true });
  rmSync(join(dir, "tokenizer_3"), { recursive: true });
  const indexFile = join(dir, "model_index.json");
  const index = JSON.parse(readFileSync(indexFile, "utf8"));
  writeFileSync(indexFile, JSON.stringify({ ...index, text_encoder_3: [null, null], tokenizer_3: [null, null] }));
  return dir;
}

describe("SD3 text conditioning", () => {
  it("joins CLIP-L and CLIP-G side by side per token, zero-padded to the T5 width, then the T5 rows", () => {
    // 77 CLIP rows of widths 1 and 2 (row r: L = r, G = 100 + r, 200 + r), a T5 of 2 rows of width 4.
    const clipL = { data: Float32Array.from({ length: 77 }, (_, r) => r), dim: 1 };
    const clipG = { data: Float32Array.from({ length: 154 }, (_, i) => (i % 2 === 0 ? 100 : 200) + Math.floor(i / 2)), dim: 2 };
    const t5 = { data: Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8), rows: 2 };
    const joint = jointSequence([clipL, clipG], t5, 4);
    expect(joint).toHaveLength((77 + 2) * 4);
    expect([...joint.subarray(0, 4)]).toEqual([0, 100, 200, 0]);
    expect([...joint.subarray(76 * 4, 77 * 4)]).toEqual([76, 176, 276, 0]);
    expect([...joint.subarray(77 * 4)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    // No T5: 77 rows of zeros after the CLIP rows, as diffusers does without text_encoder_3.
    const noT5 = jointSequence([clipL, clipG], { rows: 77 }, 4);
    expect(noT5).toHaveLength(154 * 4);
    expect(noT5.subarray(77 * 4).every((v) => v === 0)).toBe(true);
    expect(() => jointSequence([clipL, clipG], t5, 2)).toThrow(/CLIP encoders' width 3 exceeds the joint width 2/);
  });

  it("decodes latents as diffusers does for SD3: divided by the scaling factor, plus the shift factor", () => {
    const out = vaeDecoderInput(Float32Array.of(1.5305, 0, -3.061), 1.5305, 0.0609);
    expect(out[0]).toBeCloseTo(1.0609, 6);
    expect(out[1]).toBeCloseTo(0.0609, 6);
    expect(out[2]).toBeCloseTo(-1.9391, 6);
  });
});

describe("OnnxDiffusionPipeline on an SD3 export", () => {
  it("loads as sd3 with flow-matching Euler, diffusers' SD3 defaults (28 steps, guidance 7) and 64×64 images from the transformer's sample size", async () => {
    const p = await OnnxDiffusionPipeline.load(tiny.dirs.sd3, threads);
    try {
      expect(p.info).toMatchObject({
        family: "sd3",
        scheduler: "FlowMatchEulerDiscreteScheduler",
        height: 64,
        width: 64,
        steps: 28,
        guidanceScale: 7,
      });
    } finally {
      await p.release();
    }
  });

  it("the prompt, the guidance scale and the T5 encoder each change the image", async () => {
    // An export without T5, as diffusers takes one.
    const dir = withoutT5("sd3-no-t5");
    const cat = { prompt: "a photo of a cat", seed: 3 };
    const [a, b] = await imagesOf(tiny.dirs.sd3, { steps: 3, guidanceScale: 4.5, ...threads }, [cat, { prompt: "a red bicycle", seed: 3 }]);
    const [c] = await imagesOf(tiny.dirs.sd3, { steps: 3, guidanceScale: 2, ...threads }, [cat]);
    const [d] = await imagesOf(dir, { steps: 3, guidanceScale: 4.5, ...threads }, [cat]);
    expect(same(a.image, b.image)).toBe(false);
    expect(same(a.image, c.image)).toBe(false);
    expect(same(a.image, d.image)).toBe(false);
  });

  it("the T5 states themselves reach the transformer: a T5 vocabulary that cuts the prompt otherwise changes the image", async () => {
    const dir = copyOf("sd3-other-t5-vocab");
    const file = join(dir, "tokenizer_3", "tokenizer.json");
    const json = JSON.parse(readFileSync(file, "utf8"));
    // "▁cat" scored below ▁ c a t: the word takes those pieces (other T5 ids; every id, CLIP's and the sequence length unchanged).
    for (const entry of json.model.vocab) if (entry[0] === `${METASPACE}cat`) entry[1] = -100;
    writeFileSync(file, JSON.stringify(json));
    const options = { steps: 2, guidanceScale: 4.5, ...threads };
    const prompts = [
      { prompt: "a photo of a cat", seed: 3 },
      { prompt: "a photo of a dog", seed: 3 },
    ];
    const [a, d] = await imagesOf(tiny.dirs.sd3, options, prompts);
    const [b, c] = await imagesOf(dir, options, prompts);
    expect(same(a.image, b.image)).toBe(false);
    // A prompt both vocabularies cut alike gives the same image.
    expect(same(c.image, d.image)).toBe(true);
  });

  it("a T5 the index names but whose file is missing is an error naming it, not a silent run on zeros", async () => {
    const dir = copyOf("sd3-t5-file-missing");
    rmSync(join(dir, "text_encoder_3"), { recursive: true });
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/text_encoder_3[/\\]model\.onnx: missing model file/);
  });

  it("an SD3 export without its transformer names the transformer file", async () => {
    const dir = copyOf("sd3-no-transformer");
    rmSync(join(dir, "transformer"), { recursive: true });
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/transformer[/\\]model\.onnx: missing model file/);
  });

  it("refuses a Flux-style transformer by its inputs", async () => {
    const dir = copyOf("flux-like");
    writeFileSync(join(dir, "transformer", "model.onnx"), identityModel("img_ids", ["batch", "sequence", 3], "out_hidden_states"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /transformer[/\\]model\.onnx: inputs img_ids make this a Flux-style transformer/,
    );
  });

  it("names a pooled width the CLIP encoders do not give", async () => {
    const dir = copyOf("sd3-pooled-mismatch");
    // CLIP-L's encoder twice: its projection is 8 wide, so the pooled embeddings are 16, not the transformer's 20.
    cpSync(join(dir, "text_encoder", "model.onnx"), join(dir, "text_encoder_2", "model.onnx"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /transformer[/\\]model\.onnx: input "pooled_projections" has width 20, the CLIP encoders' text_embeds give 16/,
    );
  });

  it("names a VAE whose latents have other channels than the transformer's", async () => {
    const dir = copyOf("sd3-vae-4");
    cpSync(join(tiny.dirs.sd15, "vae_decoder"), join(dir, "vae_decoder"), { recursive: true });
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(
      /vae_decoder[/\\]model\.onnx: input "latent_sample" has 4 channels; the denoiser makes 16/,
    );
  });

  it("needs sides in multiples of 16 (2×2 latent patches)", async () => {
    await expect(OnnxDiffusionPipeline.load(tiny.dirs.sd3, { height: 72, width: 64 })).rejects.toThrow(/multiples of 16 \(got 72×64\)/);
  });

  it("names a T5 tokenizer that is not a Unigram one", async () => {
    const dir = copyOf("sd3-bpe-t5");
    writeFileSync(join(dir, "tokenizer_3", "tokenizer.json"), JSON.stringify({ model: { type: "BPE", vocab: {}, merges: [] } }));
    // Read before any session opens: the tokenizer is named, not the (here missing) transformer.
    rmSync(join(dir, "transformer", "model.onnx"));
    await expect(OnnxDiffusionPipeline.load(dir)).rejects.toThrow(/tokenizer_3[/\\]tokenizer\.json: model type "BPE"; only a Unigram/);
  });
});
