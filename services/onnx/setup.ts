/**
 * Builds the onnx backends from a model map (`profiles/onnx/*.json`): pool model name → export
 * folder and settings. When the map names the tiny generated models and they are missing, or
 * an older generator made them, they are generated first (so `npm start -- --backend onnx` works
 * on a fresh clone, and after an update that adds or changes a stand-in).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { z } from "zod";
import { makeTinyModels, TINY_MODELS_STAMP, TINY_MODELS_VERSION } from "../../tools/make-tiny-models.ts";
import { ThreadedClipJudge, ThreadedGenerationBackend, type OnnxModelEntry } from "./index.ts";
import { DEFAULT_PROFILES_DIR } from "../files/profiles.ts";

const ModelMapSchema = z.object({
  description: z.string().optional(),
  models: z.record(z.string(), z.object({ dir: z.string(), steps: z.number().int().positive().optional(), guidanceScale: z.number().nonnegative().optional() })),
  judge: z.object({ dir: z.string(), scoring: z.enum(["head", "clip"]).optional() }),
});

/** The default model map: tiny generated stand-ins for the pool. */
export const DEFAULT_MODEL_MAP = join(DEFAULT_PROFILES_DIR, "onnx", "tiny-pool.json");

/** Options of the onnx backends. */
export interface OnnxSetupOptions {
  /** Model map file. */
  modelMap?: string;
  /** Folder the map's `dir`s are relative to. */
  modelsDir: string;
  /** Models resident per worker at once. */
  maxResident?: number;
  intraOpNumThreads?: number;
  /**
   * Run one single-step image after each load (default true): the first batch is warm, and an
   * export that loads but cannot make an image fails its load. Off, swaps are faster and such an
   * export fails its batches instead (the resource manager plans around either).
   */
  warmUp?: boolean;
}

/** True unless `dir` holds tiny models this generator version wrote. */
export function tinyModelsStale(dir: string): boolean {
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
 * last), so a process reading them (another service started on the same folder) never reads a
 * half-written file; two generating at once make the same bytes, and the last move wins.
 */
function generateTinyModels(base: string): void {
  mkdirSync(base, { recursive: true });
  const fresh = mkdtempSync(join(base, ".tiny-"));
  try {
    makeTinyModels(fresh);
    for (const name of readdirSync(fresh).filter((n) => n !== TINY_MODELS_STAMP)) {
      const target = join(base, name);
      const old = `${fresh}-old-${name}`;
      const moved = existsSync(target) && renamed(target, old);
      renamed(join(fresh, name), target);
      if (moved) rmSync(old, { recursive: true, force: true });
    }
    renameSync(join(fresh, TINY_MODELS_STAMP), join(base, TINY_MODELS_STAMP));
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
}

/** Reads the map, generating the tiny models if they are what is missing or stale. */
export function prepareOnnx(opts: OnnxSetupOptions) {
  const map = ModelMapSchema.parse(JSON.parse(readFileSync(opts.modelMap ?? DEFAULT_MODEL_MAP, "utf8")));
  const base = resolve(opts.modelsDir);
  const at = (dir: string) => (isAbsolute(dir) ? dir : join(base, dir));
  const folders = [...Object.values(map.models).map((m) => m.dir), map.judge.dir];
  // Tiny stand-ins are made when one is missing, and again when an older generator made them (a
  // stand-in added since, such as tiny-sd3, or changed).
  const missing = folders.some((d) => !existsSync(join(at(d), d === map.judge.dir ? "head" : "model_index.json")));
  if (folders.every((d) => d.startsWith("tiny-")) && (missing || tinyModelsStale(base))) generateTinyModels(base);
  const models: Record<string, OnnxModelEntry> = {};
  for (const [name, m] of Object.entries(map.models)) {
    models[name] = { dir: at(m.dir), steps: m.steps, guidanceScale: m.guidanceScale, intraOpNumThreads: opts.intraOpNumThreads ?? 1 };
  }
  return {
    models: Object.keys(models),
    // Each in a worker thread of its own: a session run blocks the thread that calls it.
    generationBackend: () => new ThreadedGenerationBackend({ models, maxResident: opts.maxResident ?? 1, intraOpNumThreads: opts.intraOpNumThreads ?? 1, warmUp: opts.warmUp ?? true }),
    judge: () => ThreadedClipJudge.load({ dir: at(map.judge.dir), scoring: map.judge.scoring ?? "head", intraOpNumThreads: opts.intraOpNumThreads ?? 1 }),
  };
}
