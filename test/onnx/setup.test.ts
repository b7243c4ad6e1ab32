import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { prepareOnnx, tinyModelsStale } from "../../services/lib/onnx-setup.ts";
import { TINY_MODELS_STAMP, TINY_MODELS_VERSION } from "../../tools/make-tiny-models.ts";

const root = mkdtempSync(join(tmpdir(), "hadis-onnx-setup-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("the tiny stand-ins behind the default model map", () => {
  it("are made when missing, kept when this generator made them, and made again when an older one did", () => {
    const dir = join(root, "models");
    expect(tinyModelsStale(dir)).toBe(true);
    prepareOnnx({ modelsDir: dir });
    expect(JSON.parse(readFileSync(join(dir, TINY_MODELS_STAMP), "utf8")).version).toBe(TINY_MODELS_VERSION);
    expect(statSync(join(dir, "tiny-sd3", "transformer", "model.onnx")).isFile()).toBe(true);
    const made = statSync(join(dir, "tiny-sd3", "transformer", "model.onnx")).mtimeMs;
    prepareOnnx({ modelsDir: dir });
    expect(statSync(join(dir, "tiny-sd3", "transformer", "model.onnx")).mtimeMs).toBe(made);
    // A folder an older generator wrote (before tiny-sd3, with no stamp or an older one): made again.
    rmSync(join(dir, "tiny-sd3"), { recursive: true });
    writeFileSync(join(dir, TINY_MODELS_STAMP), JSON.stringify({ version: TINY_MODELS_VERSION - 1 }));
    expect(tinyModelsStale(dir)).toBe(true);
    prepareOnnx({ modelsDir: dir });
    expect(statSync(join(dir, "tiny-sd3", "transformer", "model.onnx")).isFile()).toBe(true);
    expect(tinyModelsStale(dir)).toBe(false);
  });
});
