import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ModelProfileSchema } from "../../contracts/profile.ts";
import { profileCommand } from "../../services/cli/profile.ts";
import { useTinyModels } from "../helpers/tiny-models.ts";

const tiny = useTinyModels("profile");

describe("profileCommand", () => {
  it("writes a schema-valid profile with latency per batch size", async () => {
    const out = join(tiny.root, "tiny-turbo.json");
    await profileCommand(tiny.dirs.turbo, { batches: [1, 2], out, steps: 1, guidanceScale: 0, runs: 2, intraOpNumThreads: 1 });
    const profile = ModelProfileSchema.parse(JSON.parse(readFileSync(out, "utf8")));
    expect(profile.name).toBe("tiny-turbo");
    expect(Object.keys(profile.latencyMsByBatch)).toEqual(["1", "2"]);
    expect(profile.latencyMsByBatch["1"]).toBeGreaterThan(0);
    expect(profile.loadMs).toBeGreaterThan(0);
    expect(profile.sizeGib).toBeGreaterThan(0);
    expect(profile.steps).toBe(1);
    expect(profile.source).toMatch(/onnxruntime-node/);
  });
});
