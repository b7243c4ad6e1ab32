import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OnnxGenerationBackend } from "../../services/onnx/generation-backend.ts";
import { DEFAULT_MODEL_MAP } from "../../services/onnx/setup.ts";
import { startSystem } from "../../services/system.ts";
import { useTinyModels } from "../helpers/tiny-models.ts";

const tiny = useTinyModels("backend");

function backend(maxResident: number) {
  return new OnnxGenerationBackend({
    models: {
      sd15: { dir: tiny.dirs.sd15, steps: 2 },
      turbo: { dir: tiny.dirs.turbo, steps: 1, guidanceScale: 0 },
      sdxl: { dir: tiny.dirs.sdxl, steps: 2 },
      broken: join(tiny.root, "does-not-exist"),
    },
    maxResident,
    intraOpNumThreads: 1,
  });
}

describe("OnnxGenerationBackend", () => {
  it("generates after load and refuses models that are not loaded", async () => {
    const b = backend(1);
    await expect(b.generate("sd15", [{ prompt: "a cat", seed: 1 }])).rejects.toThrow(/not loaded/);
    await b.load("sd15");
    const images = await b.generate("sd15", [
      { prompt: "a cat", seed: 1 },
      { prompt: "a dog", seed: 2 },
    ]);
    expect(images.map((i) => [i.width, i.height])).toEqual([
      [64, 64],
      [64, 64],
    ]);
    await b.close();
    expect(b.loadedModels).toEqual([]);
  });

  it("keeps at most maxResident models, unloading the least recently used", async () => {
    const b = backend(2);
    await b.load("sd15");
    await b.load("turbo");
    await b.generate("sd15", [{ prompt: "x", seed: 1 }]);
    await b.load("sdxl");
    expect(b.loadedModels).toEqual(["sd15", "sdxl"]);
    await expect(b.generate("turbo", [{ prompt: "x", seed: 1 }])).rejects.toThrow(/not loaded/);
    await b.close();
  });

  it("survives load/unload cycles with identical output", async () => {
    const b = backend(1);
    let first: Uint8Array | undefined;
    for (let cycle = 0; cycle < 5; cycle++) {
      await b.load("turbo");
      const [image] = await b.generate("turbo", [{ prompt: "a photo of a cat", seed: 3 }]);
      first ??= image.image;
      expect(Buffer.from(image.image).equals(Buffer.from(first))).toBe(true);
      await b.unload("turbo");
      expect(b.loadedModels).toEqual([]);
    }
    await b.unload("turbo");
    await b.close();
  });

  it("reports unknown models and missing folders", async () => {
    const b = backend(1);
    await expect(b.load("nope")).rejects.toThrow(/unknown model "nope"/);
    await expect(b.load("broken")).rejects.toThrow(/does-not-exist[/\\]model_index\.json: missing file/);
    await b.load("turbo");
    expect(b.loadedModels).toEqual(["turbo"]);
    await b.close();
  });
});

describe("the onnx backend's model map", () => {
  it("must map every pool model: workers that could never load one are refused at start, before any connection", async () => {
    const map = JSON.parse(readFileSync(DEFAULT_MODEL_MAP, "utf8"));
    delete map.models["sd35-large"];
    const modelMap = join(tiny.root, "map-without-large.json");
    writeFileSync(modelMap, JSON.stringify(map));
    // Nothing listens on port 1: the refusal comes before the first connection.
    await expect(
      startSystem({ natsUrl: "nats://127.0.0.1:1", backend: "onnx", onnx: { modelMap, modelsDir: join(tiny.root, "models") } }),
    ).rejects.toThrow(/no export for sd35-large, which the profile pool has/);
  });

  it("applies a request's settings: size, steps, guidance and negative prompt, one run per distinct settings", async () => {
    const b = new OnnxGenerationBackend({
      models: { sd15: { dir: tiny.dirs.sd15, steps: 2, guidanceScale: 7.5 }, sd3: { dir: tiny.dirs.sd3, steps: 2, guidanceScale: 3 } },
      maxResident: 2,
      intraOpNumThreads: 1,
    });
    await b.load("sd15");
    await b.load("sd3");
    const same = { prompt: "a photo of a cat", seed: 5 };
    const [plain, wide, more, guided, negative] = await b.generate("sd15", [
      same,
      { ...same, options: { width: 96, height: 48 } },
      { ...same, options: { steps: 3 } },
      { ...same, options: { guidanceScale: 2 } },
      { ...same, options: { negativePrompt: "a dog" } },
    ]);
    expect([plain.width, plain.height, wide.width, wide.height]).toEqual([64, 64, 96, 48]);
    expect(plain.applied).toEqual({ steps: 2, guidanceScale: 7.5, width: 64, height: 64, negativePrompt: false });
    expect(wide.applied).toMatchObject({ width: 96, height: 48 });
    expect(more.applied).toMatchObject({ steps: 3 });
    expect(guided.applied).toMatchObject({ guidanceScale: 2 });
    expect(negative.applied).toMatchObject({ negativePrompt: true });
    // Each setting changes the image (same prompt and seed): the settings reached the denoiser loop.
    const bytes = [plain, more, guided, negative].map((i) => Buffer.from(i.image).toString("base64"));
    expect(new Set(bytes).size).toBe(4);
    // In a batch or alone, the same image (grouping keeps batches deterministic).
    const [alone] = await b.generate("sd15", [{ ...same, options: { steps: 3 } }]);
    expect(Buffer.from(alone.image).equals(Buffer.from(more.image))).toBe(true);
    // SD3 sides are multiples of 16; a size that is not fails the batch naming the rule.
    const [sd3] = await b.generate("sd3", [{ ...same, options: { width: 80, height: 48 } }]);
    expect([sd3.width, sd3.height]).toEqual([80, 48]);
    await expect(b.generate("sd3", [{ ...same, options: { width: 72, height: 48 } }])).rejects.toThrow(/multiples of 16/);
    await b.close();
  });
});
