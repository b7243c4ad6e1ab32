import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OnnxGenerationBackend } from "../../services/lib/onnx/generation-backend.ts";
import { DEFAULT_MODEL_MAP } from "../../services/lib/onnx-setup.ts";
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
    const images = await b.generate("sd15", [{ prompt: "a cat", seed: 1 }, { prompt: "a dog", seed: 2 }]);
    expect(images.map((i) => [i.width, i.height])).toEqual([[64, 64], [64, 64]]);
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
    await expect(startSystem({ natsUrl: "nats://127.0.0.1:1", backend: "onnx", onnx: { modelMap, modelsDir: join(tiny.root, "models") } }))
      .rejects.toThrow(/no export for sd35-large, which the profile pool has/);
  });
});
