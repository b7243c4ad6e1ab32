/** The tiny ONNX models the ONNX tests run on, generated once per test file into a folder removed after it. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { makeTinyModels, type TinyModelDirs } from "../../tools/make-tiny-models.ts";

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
