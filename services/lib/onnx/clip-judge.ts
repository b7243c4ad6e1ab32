/**
 * `JudgeBackend` over a CLIP export: the reference design's head (a small MLP over the CLIP
 * image embedding → P(real), `head/model.onnx`) or, as an alternative, plain CLIP
 * image–text cosine similarity mapped to [0, 1]. Thresholds are the `share` quantile of a
 * bounded window of each model's recent scores.
 */
import { HadisError } from "../../../contracts/errors.ts";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { JudgeBackend, JudgeInput } from "../../../actors/worker/backend.ts";
import { clipPixelValues, CLIP_IMAGE_SIZE } from "../../../actors/diffusion/image.ts";
import { decodePng } from "../../../actors/diffusion/png.ts";
import { ClipTokenizer, padTokenFromConfig } from "../../../actors/diffusion/tokenizer.ts";
import { ScoreWindows } from "./score-windows.ts";
import { OnnxModel, type RuntimeOptions, type TensorData } from "./runtime.ts";

/** How images are scored. */
export const JudgeScoring = {
  /** P(real) from `head/model.onnx` over the image embedding (the reference design). */
  Head: "head",
  /** CLIP image–text cosine similarity, mapped from [−1, 1] to [0, 1]. */
  Clip: "clip",
} as const;
/** A scoring mode. */
export type JudgeScoring = (typeof JudgeScoring)[keyof typeof JudgeScoring];

/** Options for `OnnxClipJudge.load`. */
export interface OnnxClipJudgeOptions extends RuntimeOptions {
  /** Folder with `image_encoder/`, `head/` (head scoring), `text_encoder/` + `tokenizer/` (clip scoring). */
  dir: string;
  /** Default `head`. */
  scoring?: JudgeScoring;
  /** Recent scores kept per model for thresholds (default 1000). */
  windowSize?: number;
}

function l2normalize(v: Float32Array): Float32Array {
  let s = 0;
  for (const x of v) s += x * x;
  const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
  return v.map((x) => x * inv);
}

/** Scores generated images with CLIP; see the module comment. */
export class OnnxClipJudge implements JudgeBackend {
  readonly kind = "onnx-clip";
  private readonly windows: ScoreWindows;

  private readonly imageSize: number;

  private constructor(
    private readonly scoring: JudgeScoring,
    private readonly image: OnnxModel,
    private readonly head: OnnxModel | undefined,
    private readonly headOutput: string,
    private readonly text: OnnxModel | undefined,
    private readonly tokenizer: ClipTokenizer | undefined,
    windowSize: number,
  ) {
    this.windows = new ScoreWindows(windowSize);
    const side = image.input("pixel_values")?.shape[2];
    this.imageSize = typeof side === "number" ? side : CLIP_IMAGE_SIZE;
  }

  /** Loads and validates the judge folder; errors name the offending file. */
  static async load(options: OnnxClipJudgeOptions): Promise<OnnxClipJudge> {
    const scoring = options.scoring ?? JudgeScoring.Head;
    const opened: OnnxModel[] = [];
    const open = async (component: string) => {
      const model = await OnnxModel.open(join(options.dir, component, "model.onnx"), options);
      opened.push(model);
      return model;
    };
    try {
      const image = await open("image_encoder");
      image.validate([{ name: "pixel_values", rank: 4 }], [{ name: "image_embeds", rank: 2 }]);
      let head: OnnxModel | undefined;
      let headOutput = "p_real";
      let text: OnnxModel | undefined;
      let tokenizer: ClipTokenizer | undefined;
      if (scoring === JudgeScoring.Head) {
        head = await open("head");
        headOutput = head.output("p_real") ? "p_real" : (head.outputs[0]?.name ?? "p_real");
        head.validate([{ name: "image_embeds", rank: 2 }], [{ name: headOutput, rank: 2 }]);
      } else {
        text = await open("text_encoder");
        text.validate(
          [{ name: "input_ids", rank: 2 }, { name: "attention_mask", rank: 2, optional: true }],
          [{ name: "text_embeds", rank: 2 }],
        );
        const tokDir = join(options.dir, "tokenizer");
        for (const f of ["vocab.json", "merges.txt"]) {
          if (!existsSync(join(tokDir, f))) throw new Error(`${join(tokDir, f)}: missing file`);
        }
        const configFile = join(tokDir, "tokenizer_config.json");
        const config = existsSync(configFile) ? JSON.parse(readFileSync(configFile, "utf8")) : {};
        tokenizer = new ClipTokenizer(
          JSON.parse(readFileSync(join(tokDir, "vocab.json"), "utf8")),
          readFileSync(join(tokDir, "merges.txt"), "utf8"),
          { padToken: padTokenFromConfig(config) },
        );
      }
      return new OnnxClipJudge(scoring, image, head, headOutput, text, tokenizer, options.windowSize ?? 1000);
    } catch (err) {
      await Promise.all(opened.map((m) => m.release()));
      throw err;
    }
  }

  async score(batch: readonly JudgeInput[]): Promise<number[]> {
    if (batch.length === 0) return [];
    const n = batch.length;
    const side = this.imageSize;
    const plane = 3 * side * side;
    const pixels = new Float32Array(n * plane);
    batch.forEach((input, i) => pixels.set(clipPixelValues(decodePng(input.image), side), i * plane));
    const imageOut = await this.image.run(
      { pixel_values: { type: "float32", data: pixels, dims: [n, 3, side, side] } },
      ["image_embeds"],
    );
    const embeds = imageOut.image_embeds;
    let scores: number[];
    if (this.scoring === JudgeScoring.Head && this.head) {
      const out = await this.head.run({ image_embeds: { type: "float32", data: embeds.data, dims: embeds.dims } }, [this.headOutput]);
      const values = out[this.headOutput].data;
      const stride = values.length / n;
      const logits = this.headOutput.includes("logit");
      scores = batch.map((_, i) => {
        const v = values[i * stride];
        return logits ? 1 / (1 + Math.exp(-v)) : v;
      });
    } else {
      scores = await this.clipScores(batch, embeds.data, embeds.dims[1]);
    }
    // A NaN is a broken model, not a low score: read as 0 it would escalate the image and drag the
    // model's threshold window down.
    const broken = scores.findIndex((s) => !Number.isFinite(s));
    if (broken >= 0) throw new HadisError("judge_failed", `the judge's score of image ${broken + 1} of ${scores.length} is ${scores[broken]} (a broken model)`);
    const clamped = scores.map((s) => Math.min(Math.max(s, 0), 1));
    batch.forEach((input, i) => this.windows.record(input.model, clamped[i]));
    return clamped;
  }

  private async clipScores(batch: readonly JudgeInput[], imageEmbeds: Float32Array, dim: number): Promise<number[]> {
    const tokenizer = this.tokenizer as ClipTokenizer;
    const text = this.text as OnnxModel;
    const n = batch.length;
    const seq = tokenizer.maxLength;
    const ids = batch.flatMap((b) => tokenizer.encodePadded(b.prompt));
    const int64 = text.input("input_ids")?.type === "int64";
    const tensor = (values: number[]): TensorData =>
      int64
        ? { type: "int64", data: BigInt64Array.from(values, (v) => BigInt(v)), dims: [n, seq] }
        : { type: "int32", data: Int32Array.from(values), dims: [n, seq] };
    const feeds: Record<string, TensorData> = { input_ids: tensor(ids) };
    if (text.input("attention_mask")) {
      feeds.attention_mask = tensor(
        batch.flatMap((b) => {
          const len = tokenizer.encode(b.prompt).length;
          return Array.from({ length: seq }, (_, i) => (i < len ? 1 : 0));
        }),
      );
    }
    const textEmbeds = (await text.run(feeds, ["text_embeds"])).text_embeds.data;
    return batch.map((_, i) => {
      const a = l2normalize(imageEmbeds.subarray(i * dim, (i + 1) * dim));
      const b = l2normalize(textEmbeds.subarray(i * dim, (i + 1) * dim));
      let cos = 0;
      for (let k = 0; k < dim; k++) cos += a[k] * b[k];
      return (cos + 1) / 2;
    });
  }

  /** The `share` quantile of the model's recent scores; 0 (escalate nothing) before any score. */
  thresholdFor(model: string, share: number): number {
    return this.windows.thresholdFor(model, share);
  }

  async close(): Promise<void> {
    await Promise.all([this.image.release(), this.head?.release(), this.text?.release()]);
  }
}
