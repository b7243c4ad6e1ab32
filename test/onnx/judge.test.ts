import { unlinkSync, cpSync, writeFileSync } from "node:fs";
import { nanClipHead } from "../../tools/make-tiny-models.ts";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { encodePng } from "../../actors/diffusion/png.ts";
import { OnnxClipJudge } from "../../services/onnx/clip-judge.ts";
import { useTinyModels } from "../helpers/tiny-models.ts";

const tiny = useTinyModels("judge");

function image(seed: number): Uint8Array {
  let s = seed;
  const pixels = Uint8Array.from({ length: 64 * 64 * 3 }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s >>> 24;
  });
  return encodePng({ width: 64, height: 64, pixels });
}

describe("OnnxClipJudge", () => {
  // Split encoders (image_encoder/, text_encoder/, tokenizer/), and Optimum's single-file `clip`
  // export (model.onnx with the tokenizer files beside it).
  it.each([
    ["split", "head"],
    ["split", "clip"],
    ["single-file", "head"],
    ["single-file", "clip"],
  ] as const)("%s export, %s scoring: scores in [0, 1], deterministically, each image against its own prompt", async (layout, scoring) => {
    const judge = await OnnxClipJudge.load({
      dir: layout === "split" ? tiny.dirs.clip : tiny.dirs.clipSingle,
      scoring,
      intraOpNumThreads: 1,
    });
    const batch = [1, 2, 3].map((seed) => ({ prompt: "a photo of a cat", model: "m", image: image(seed) }));
    const scores = await judge.score(batch);
    expect(scores).toHaveLength(3);
    for (const s of scores) expect(s >= 0 && s <= 1).toBe(true);
    expect(new Set(scores).size).toBeGreaterThan(1);
    expect(await judge.score(batch)).toEqual(scores);
    expect((await judge.score([batch[1]]))[0]).toBeCloseTo(scores[1], 5);
    // CLIP scoring reads each image against its own prompt; the head reads the image alone.
    const bridge = await judge.score(batch.map((b) => ({ ...b, prompt: "an old stone bridge over a river" })));
    expect(bridge.every((score, i) => score === scores[i])).toBe(scoring === "head");
    await judge.close();
  });

  it("names a single-file export's missing tokenizer file", async () => {
    const dir = join(tiny.root, "judge-single-no-vocab");
    cpSync(tiny.dirs.clipSingle, dir, { recursive: true });
    unlinkSync(join(dir, "vocab.json"));
    await expect(OnnxClipJudge.load({ dir })).rejects.toThrow(/vocab\.json: missing file/);
  });

  it("thresholds are the share quantile of a bounded per-model window", async () => {
    const judge = await OnnxClipJudge.load({ dir: tiny.dirs.clip, windowSize: 4, intraOpNumThreads: 1 });
    expect(judge.thresholdFor("m", 0.5)).toBe(0);
    const scores = await judge.score([1, 2, 3, 4, 5, 6].map((seed) => ({ prompt: "", model: "m", image: image(seed) })));
    const window = scores.slice(2).sort((a, b) => a - b);
    expect(judge.thresholdFor("m", 0)).toBeCloseTo(window[0], 10);
    expect(judge.thresholdFor("m", 1)).toBeCloseTo(window[3], 10);
    expect(judge.thresholdFor("m", 0.5)).toBeCloseTo((window[1] + window[2]) / 2, 10);
    expect(judge.thresholdFor("other", 0.5)).toBe(0);
    await judge.close();
  });

  it("a head that answers NaN fails the judging (judge_failed), recording nothing, rather than scoring 0", async () => {
    const dir = join(tiny.root, "judge-nan-head");
    cpSync(tiny.dirs.clip, dir, { recursive: true });
    writeFileSync(join(dir, "head", "model.onnx"), nanClipHead(16));
    const judge = await OnnxClipJudge.load({ dir, windowSize: 4, intraOpNumThreads: 1 });
    await expect(judge.score([{ prompt: "a cat", model: "m", image: image(1) }])).rejects.toMatchObject({
      code: "judge_failed",
      message: expect.stringMatching(/is NaN \(a broken model\)/),
    });
    expect(judge.thresholdFor("m", 1)).toBe(0); // no score went into the window
    await judge.close();
  });

  it("names a missing head model", async () => {
    const dir = join(tiny.root, "judge-no-head");
    cpSync(tiny.dirs.clip, dir, { recursive: true });
    unlinkSync(join(dir, "head", "model.onnx"));
    await expect(OnnxClipJudge.load({ dir })).rejects.toThrow(/head[/\\]model\.onnx: missing model file/);
  });
});
