import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelProfileSchema } from "../../contracts/profile.ts";
import { profileCommand } from "../../services/cli/profile.ts";
import { makeTinyModels, type TinyModelDirs } from "../../tools/make-tiny-models.ts";

let root: string;
let dirs: TinyModelDirs;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "hadis-onnx-profile-"));
  dirs = makeTinyModels(join(root, "models"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("profileCommand", () => {
  it("writes a schema-valid profile with latency per batch size", async () => {
    const out = join(root, "tiny-turbo.json");
    await profileCommand(dirs.turbo, { batches: [1, 2], out, steps: 1, guidanceScale: 0, runs: 2, intraOpNumThreads: 1 });
    const profile = ModelProfileSchema.parse(JSON.parse(readFileSync(out, "utf8")));
    expect(profile.name).toBe("tiny-turbo");
    expect(Object.keys(profile.latencyMsByBatch)).toEqual(["1", "2"]);
    expect(profile.latencyMsByBatch["1"]).toBeGreaterThan(0);
    expect(profile.loadMs).toBeGreaterThan(0);
    expect(profile.unloadMs).toBeGreaterThanOrEqual(0);
    expect(profile.sizeGib).toBeGreaterThan(0);
    expect(profile.steps).toBe(1);
    expect(profile.source).toMatch(/onnxruntime-node/);
  });
});
