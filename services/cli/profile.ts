/**
 * `hadis profile <modelDir>`: measures an ONNX model folder on this machine — load time
 * (sessions + a one-step warm-up, as the ONNX backend loads), median latency per batch
 * size, unload time, RSS growth while loaded — and writes a `profiles/models/*.json` file.
 */
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { basename, join } from "node:path";
import { ModelProfileSchema, type ModelProfile } from "../../contracts/profile.ts";
import { OnnxDiffusionPipeline } from "../onnx/pipeline.ts";
import { ONNXRUNTIME_VERSION } from "../onnx/runtime.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

/** Arguments of the profile command. */
export interface ProfileArgs {
  /** Batch sizes to time. */
  batches: number[];
  /** Output file; without it the JSON goes to stdout. */
  out?: string;
  /** Profile name (default: the folder name, sanitised). */
  name?: string;
  /** Timed runs per batch size after one untimed run (default 3). */
  runs?: number;
  /** Denoising steps and guidance (default: the pipeline's, 50 and 7.5). */
  steps?: number;
  guidanceScale?: number;
  /** ORT intra-op threads. */
  intraOpNumThreads?: number;
}

/** A profile plus the memory figures the schema has no field for. */
export interface ProfileMeasurement {
  profile: ModelProfile;
  /** RSS growth from before load to after warm-up, MiB. */
  rssDeltaMib: number;
  /** RSS after unload minus before load, MiB. */
  rssAfterUnloadMib: number;
}

function folderBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? folderBytes(path) : statSync(path).size;
  }
  return total;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const round = (v: number, digits = 3) => Number(v.toFixed(digits));
const mib = (bytes: number) => bytes / 2 ** 20;

/** Runs the measurements and returns the validated profile. */
export async function measureProfile(modelDir: string, args: ProfileArgs): Promise<ProfileMeasurement> {
  const name =
    args.name ??
    (basename(modelDir)
      .replace(/[^A-Za-z0-9_-]/g, "-")
      .replace(/^[^A-Za-z0-9]+/, "") ||
      "model");
  const runs = Math.max(1, args.runs ?? 3);
  const rssBefore = process.memoryUsage().rss;
  const loadStart = performance.now();
  const pipeline = await OnnxDiffusionPipeline.load(modelDir, {
    steps: args.steps,
    guidanceScale: args.guidanceScale,
    intraOpNumThreads: args.intraOpNumThreads,
  });
  const latencyMsByBatch: Record<string, number> = {};
  let loadMs: number;
  let unloadMs: number;
  let rssLoaded: number;
  try {
    await pipeline.generate([{ prompt: "", seed: 0 }], { steps: 1 });
    loadMs = performance.now() - loadStart;
    rssLoaded = process.memoryUsage().rss;
    for (const b of args.batches) {
      if (!Number.isInteger(b) || b < 1) throw new ConfigurationError(`profile: batch size ${b} is not a positive integer`);
      const inputs = Array.from({ length: b }, (_, i) => ({ prompt: "a photo of a cat", seed: i + 1 }));
      await pipeline.generate(inputs);
      const times: number[] = [];
      for (let r = 0; r < runs; r++) {
        const start = performance.now();
        await pipeline.generate(inputs);
        times.push(performance.now() - start);
      }
      latencyMsByBatch[String(b)] = round(median(times));
    }
  } finally {
    const unloadStart = performance.now();
    await pipeline.release();
    unloadMs = performance.now() - unloadStart;
  }
  const rssDeltaMib = mib(rssLoaded - rssBefore);
  const rssAfterUnloadMib = mib(process.memoryUsage().rss - rssBefore);
  const { info } = pipeline;
  const profile = ModelProfileSchema.parse({
    name,
    displayName: basename(modelDir),
    steps: info.steps,
    gpu: `cpu (${cpus()[0]?.model.trim() ?? "unknown"}, ${cpus().length} cores)`,
    latencyMsByBatch,
    sizeGib: round(folderBytes(modelDir) / 2 ** 30, 6),
    loadMs: round(loadMs),
    unloadMs: round(unloadMs),
    source:
      `measured by hadis profile with onnxruntime-node ${ONNXRUNTIME_VERSION} (cpu): ${info.family} ${info.width}x${info.height}, ` +
      `${info.steps} steps ${info.scheduler}, guidance ${info.guidanceScale}; latency = median of ${runs} runs after one untimed run; ` +
      `loadMs = sessions + one-step warm-up; sizeGib = files on disk; RSS +${rssDeltaMib.toFixed(1)} MiB loaded, ` +
      `${rssAfterUnloadMib >= 0 ? "+" : ""}${rssAfterUnloadMib.toFixed(1)} MiB after unload`,
  });
  return { profile, rssDeltaMib, rssAfterUnloadMib };
}

/** The CLI entry: measure `modelDir` and write the profile JSON to `args.out` (or stdout). */
export async function profileCommand(modelDir: string, args: ProfileArgs): Promise<void> {
  const { profile } = await measureProfile(modelDir, args);
  const json = JSON.stringify(profile, null, 2) + "\n";
  if (args.out) writeFileSync(args.out, json);
  else process.stdout.write(json);
}
