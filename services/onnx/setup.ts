/**
 * Builds the onnx backends from a model map (`profiles/onnx/*.json`): pool model name → export
 * folder and settings. When the map names the tiny generated models and they are missing, or
 * an older generator made them, the tiny-model command makes them first (so `npm start --
 * --backend onnx` works on a fresh clone, and after an update that adds or changes a stand-in).
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { isAbsolute, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { ModelExportError } from "../../contracts/errors.ts";
import { packagePath } from "../files/package-root.ts";
import { ThreadedClipJudge, ThreadedGenerationBackend, type OnnxModelEntry } from "./index.ts";
import { DEFAULT_PROFILES_DIR } from "../files/profiles.ts";

const ModelMapSchema = z.object({
  description: z.string().optional(),
  models: z.record(
    z.string(),
    z.object({ dir: z.string(), steps: z.number().int().positive().optional(), guidanceScale: z.number().nonnegative().optional() }),
  ),
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

/**
 * Runs the tiny-model command (`tools/make-tiny-models.ts --if-stale`) on `base`: it makes them
 * when one is missing or an older generator made them, and does nothing otherwise. A command, not
 * an import: a service never loads the generator (onnx-proto, protobufjs) to serve.
 */
function ensureTinyModels(base: string): Promise<void> {
  const fromSource = import.meta.url.endsWith(".ts");
  const args = fromSource
    ? ["--import", pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href, packagePath("tools", "make-tiny-models.ts")]
    : [packagePath("dist", "tools", "make-tiny-models.js")];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...args, base, "--if-stale"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d));
    child.once("error", (err) => reject(new ModelExportError(`cannot run the tiny-model command: ${err.message}`, { cause: err })));
    child.once("exit", (code, signal) =>
      code === 0
        ? resolve()
        : reject(
            new ModelExportError(
              `the tiny-model command failed for ${base} (${signal ?? `exit ${code}`}): ${stderr.trim().split("\n").slice(-3).join(" ")}`,
            ),
          ),
    );
  });
}

/** Reads the map, having the tiny models made if they are what it names and one is missing or stale. */
export async function prepareOnnx(opts: OnnxSetupOptions) {
  const map = ModelMapSchema.parse(JSON.parse(readFileSync(opts.modelMap ?? DEFAULT_MODEL_MAP, "utf8")));
  const base = resolve(opts.modelsDir);
  const at = (dir: string) => (isAbsolute(dir) ? dir : join(base, dir));
  const folders = [...Object.values(map.models).map((m) => m.dir), map.judge.dir];
  // Tiny stand-ins are made when one is missing, and again when an older generator made them (a
  // stand-in added since, such as tiny-sd3, or changed): the command checks both.
  if (folders.every((d) => d.startsWith("tiny-"))) await ensureTinyModels(base);
  const models: Record<string, OnnxModelEntry> = {};
  for (const [name, m] of Object.entries(map.models)) {
    models[name] = { dir: at(m.dir), steps: m.steps, guidanceScale: m.guidanceScale, intraOpNumThreads: opts.intraOpNumThreads ?? 1 };
  }
  return {
    models: Object.keys(models),
    // Each in a worker thread of its own: a session run blocks the thread that calls it.
    generationBackend: () =>
      new ThreadedGenerationBackend({
        models,
        maxResident: opts.maxResident ?? 1,
        intraOpNumThreads: opts.intraOpNumThreads ?? 1,
        warmUp: opts.warmUp ?? true,
      }),
    judge: () =>
      ThreadedClipJudge.load({
        dir: at(map.judge.dir),
        scoring: map.judge.scoring ?? "head",
        intraOpNumThreads: opts.intraOpNumThreads ?? 1,
      }),
  };
}
