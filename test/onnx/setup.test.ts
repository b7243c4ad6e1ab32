import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { prepareOnnx } from "../../services/onnx/setup.ts";
import { TINY_MODELS_STAMP, TINY_MODELS_VERSION, tinyModelsStale } from "../../tools/make-tiny-models.ts";

const root = mkdtempSync(join(tmpdir(), "hadis-onnx-setup-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("the tiny stand-ins behind the default model map", () => {
  it("are made by the tiny-model command when missing, kept when this generator made them, made again when an older one did or one is gone", async () => {
    const dir = join(root, "models");
    const transformer = join(dir, "tiny-sd3", "transformer", "model.onnx");
    /** The inode of the file: a new one when the file was made again (moved into place), the same when kept. */
    const inode = (file: string) => statSync(file).ino;
    expect(tinyModelsStale(dir)).toBe(true);
    await prepareOnnx({ modelsDir: dir });
    expect(JSON.parse(readFileSync(join(dir, TINY_MODELS_STAMP), "utf8")).version).toBe(TINY_MODELS_VERSION);
    const made = inode(transformer);
    await prepareOnnx({ modelsDir: dir });
    expect(inode(transformer)).toBe(made);
    // Every folder there, but an older generator's stamp: made again.
    writeFileSync(join(dir, TINY_MODELS_STAMP), JSON.stringify({ version: TINY_MODELS_VERSION - 1 }));
    expect(tinyModelsStale(dir)).toBe(true);
    await prepareOnnx({ modelsDir: dir });
    expect(inode(transformer)).not.toBe(made);
    expect(tinyModelsStale(dir)).toBe(false);
    // The current stamp, but a folder gone: made again.
    rmSync(join(dir, "tiny-sd3"), { recursive: true });
    await prepareOnnx({ modelsDir: dir });
    expect(statSync(transformer).isFile()).toBe(true);
    // Nothing of the generation left behind.
    expect(readdirSync(dir).filter((n) => n.startsWith("."))).toEqual([]);
  });
});
