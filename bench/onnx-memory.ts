/**
 * Memory check of the ONNX backend: 50 load/unload cycles (each load includes the one-step
 * warm-up, each cycle generates one image) of a tiny model; RSS before the first load,
 * after the first cycle (the allocator's steady state) and after the last. Target: final RSS
 * within 10% of the post-first-cycle baseline. Writes `bench/results/onnx-memory.json`.
 *
 * Run: `node --expose-gc --import tsx bench/onnx-memory.ts [cycles]`
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { OnnxGenerationBackend } from "../services/onnx/generation-backend.ts";
import { ONNXRUNTIME_VERSION } from "../services/onnx/runtime.ts";
import { makeTinyModels } from "../tools/make-tiny-models.ts";

const cycles = Number(process.argv[2] ?? 50);
const gc = (globalThis as { gc?: () => void }).gc;
const rssMib = () => {
  gc?.();
  return Number((process.memoryUsage().rss / 2 ** 20).toFixed(2));
};

const root = mkdtempSync(join(tmpdir(), "hadis-onnx-memory-"));
try {
  const dirs = makeTinyModels(root);
  const backend = new OnnxGenerationBackend({
    models: { sd15: { dir: dirs.sd15, steps: 2 } },
    maxResident: 1,
    intraOpNumThreads: 1,
  });
  const startRssMib = rssMib();
  const samples: number[] = [];
  const loadMs: number[] = [];
  const started = performance.now();
  for (let i = 0; i < cycles; i++) {
    const t0 = performance.now();
    await backend.load("sd15");
    loadMs.push(performance.now() - t0);
    await backend.generate("sd15", [{ prompt: "a photo of a cat", seed: i }]);
    await backend.unload("sd15");
    samples.push(rssMib());
  }
  await backend.close();
  const baselineRssMib = samples[0];
  const endRssMib = rssMib();
  const growthVsBaseline = (endRssMib - baselineRssMib) / baselineRssMib;
  const result = {
    bench: "onnx-memory",
    onnxruntime: ONNXRUNTIME_VERSION,
    node: process.version,
    gcExposed: gc !== undefined,
    cycles,
    model: "tiny-sd15 (make-tiny-models), 2 steps, 64x64",
    startRssMib,
    afterFirstCycleRssMib: baselineRssMib,
    endRssMib,
    growthVsStart: Number(((endRssMib - startRssMib) / startRssMib).toFixed(4)),
    growthVsFirstCycle: Number(growthVsBaseline.toFixed(4)),
    withinTarget: Math.abs(growthVsBaseline) <= 0.1,
    medianLoadMs: Number([...loadMs].sort((a, b) => a - b)[loadMs.length >> 1].toFixed(2)),
    totalMs: Number((performance.now() - started).toFixed(1)),
    rssMibPerCycle: samples,
  };
  const outDir = fileURLToPath(new URL("./results", import.meta.url));
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, "onnx-memory.json"), JSON.stringify(result, null, 2) + "\n");
  const { rssMibPerCycle: _samples, ...summary } = result;
  console.log(JSON.stringify(summary, null, 2));
} finally {
  rmSync(root, { recursive: true, force: true });
}
