/** The tiny ONNX models the ONNX tests run on, generated once per test file into a folder removed after it. */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { identityModel, makeTinyModels, type TinyModelDirs } from "../../tools/make-tiny-models.ts";
import { DEFAULT_MODEL_MAP } from "../../services/onnx/setup.ts";
import { OnnxDiffusionPipeline, type PipelineOptions } from "../../services/onnx/pipeline.ts";
import type { GeneratedImage, GenerationInput } from "../../actors/worker/backend.ts";

/** A test file's tiny models: `root` is its temporary folder (for copies), `dirs` the exports; both set before its tests run. */
export interface TinyModels {
  root: string;
  dirs: TinyModelDirs;
}

/** Generates the tiny models before the file's tests (`hadis-onnx-<name>-` folder) and removes them after. */
export function useTinyModels(name: string): TinyModels {
  const tiny = {} as TinyModels;
  beforeAll(() => {
    tiny.root = mkdtempSync(join(tmpdir(), `hadis-onnx-${name}-`));
    tiny.dirs = makeTinyModels(join(tiny.root, "models"));
  });
  afterAll(() => rmSync(tiny.root, { recursive: true, force: true }));
  return tiny;
}

/** The images of `inputs`, each made on its own, by the export at `dir` loaded with `options` for the call. */
export async function imagesOf(dir: string, options: PipelineOptions, inputs: readonly GenerationInput[]): Promise<GeneratedImage[]> {
  const pipeline = await OnnxDiffusionPipeline.load(dir, options);
  try {
    const out: GeneratedImage[] = [];
    for (const input of inputs) out.push(...(await pipeline.generate([input])));
    return out;
  } finally {
    await pipeline.release();
  }
}

/** One model of a model map: its export folder (under the models folder) and generation settings. */
type MapEntry = { dir: string; steps: number; guidanceScale: number };

/** How `mapWithBrokenExport` breaks its copy: no UNet (the load fails), or a VAE decoder whose image has 4 channels (it loads; every batch fails). */
export type Breakage = "no-unet" | "vae-4-channels";

/**
 * Makes the tiny models in `modelsDir`, a copy of the `from` export broken as `breakage` says in
 * `modelsDir/broken`, and `modelsDir/map.json`: the default model map with `edit` applied (which
 * points some model at "broken"). Returns the map's path.
 */
export function mapWithBrokenExport(
  modelsDir: string,
  from: keyof TinyModelDirs,
  edit: (models: Record<string, MapEntry>) => void,
  breakage: Breakage = "no-unet",
): string {
  const dirs = makeTinyModels(modelsDir);
  const broken = join(modelsDir, "broken");
  cpSync(dirs[from], broken, { recursive: true });
  if (breakage === "no-unet") rmSync(join(broken, "unet", "model.onnx"));
  else writeFileSync(join(broken, "vae_decoder", "model.onnx"), identityModel("latent_sample", ["batch", 4, "height", "width"], "sample"));
  const map = JSON.parse(readFileSync(DEFAULT_MODEL_MAP, "utf8")) as { models: Record<string, MapEntry> };
  edit(map.models);
  const path = join(modelsDir, "map.json");
  writeFileSync(path, JSON.stringify(map));
  return path;
}
