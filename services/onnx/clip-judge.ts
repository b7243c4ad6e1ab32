/**
 * `JudgeBackend` over a CLIP export: the reference design's head (a small MLP over the CLIP
 * image embedding → P(real), `head/model.onnx`) or, as an alternative, plain CLIP
 * image–text cosine similarity mapped to [0, 1]. Thresholds are the `share` quantile of a
 * bounded window of each model's recent scores.
 */
import { HadisError } from "../../contracts/errors.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { JudgeBackend, JudgeInput } from "../../actors/worker/backend.ts";
import { JUDGE_MAX_BATCH } from "../../actors/judge/judge-queue.ts";
import { clipPixelValues, CLIP_IMAGE_SIZE } from "../../actors/diffusion/image.ts";
import { decodePng } from "../../actors/diffusion/png.ts";
import { CLIP_EOS_TOKEN, type ClipTokenizer } from "../../actors/diffusion/tokenizer.ts";
import { ScoreWindows } from "./score-windows.ts";
import { OnnxModel, type RuntimeOptions, type TensorData } from "./runtime.ts";
import { readTokenizer, tokenFeeds } from "./text-inputs.ts";

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
  /**
   * Folder of a CLIP export: either split (`image_encoder/`, and for clip scoring `text_encoder/`
   * and `tokenizer/`) or one file as Optimum's `clip` export writes it (`model.onnx` taking
   * `pixel_values`, `input_ids` and `attention_mask`, with the tokenizer files beside it or in
   * `tokenizer/`). Head scoring also needs `head/`.
   */
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

/** The CLIP models of a judge: separate image and text encoders, or one model taking both. */
type Encoders = { layout: "split"; image: OnnxModel; text?: OnnxModel } | { layout: "single"; model: OnnxModel };

/** Scores generated images with CLIP; see the module comment. */
export class OnnxClipJudge implements JudgeBackend {
  readonly kind = "onnx-clip";
  // One session run at a time; the discriminator batches what waits.
  readonly concurrency = 1;
  readonly maxBatch = JUDGE_MAX_BATCH;
  private readonly windows: ScoreWindows;

  private readonly imageSize: number;

  private constructor(
    private readonly scoring: JudgeScoring,
    private readonly encoders: Encoders,
    private readonly head: OnnxModel | undefined,
    private readonly headOutput: string,
    private readonly tokenizer: ClipTokenizer | undefined,
    windowSize: number,
  ) {
    this.windows = new ScoreWindows(windowSize);
    const side = (encoders.layout === "split" ? encoders.image : encoders.model).input("pixel_values")?.shape[2];
    this.imageSize = typeof side === "number" ? side : CLIP_IMAGE_SIZE;
  }

  /** Loads and validates the judge folder; errors name the offending file. */
  static async load(options: OnnxClipJudgeOptions): Promise<OnnxClipJudge> {
    const scoring = options.scoring ?? JudgeScoring.Head;
    const opened: OnnxModel[] = [];
    const open = async (...path: string[]) => {
      const model = await OnnxModel.open(join(options.dir, ...path), options);
      opened.push(model);
      return model;
    };
    try {
      let encoders: Encoders;
      let tokenizer: ClipTokenizer | undefined;
      // One file (Optimum's `clip` export) when there is no image_encoder/ folder beside it.
      if (!existsSync(join(options.dir, "image_encoder")) && existsSync(join(options.dir, "model.onnx"))) {
        const model = await open("model.onnx");
        model.validate(
          [
            { name: "pixel_values", rank: 4 },
            { name: "input_ids", rank: 2 },
            { name: "attention_mask", rank: 2, optional: true },
          ],
          [
            { name: "image_embeds", rank: 2 },
            { name: "text_embeds", rank: 2 },
          ],
        );
        encoders = { layout: "single", model };
        tokenizer = readTokenizer(
          existsSync(join(options.dir, "tokenizer")) ? join(options.dir, "tokenizer") : options.dir,
          CLIP_EOS_TOKEN,
        );
      } else {
        const image = await open("image_encoder", "model.onnx");
        image.validate([{ name: "pixel_values", rank: 4 }], [{ name: "image_embeds", rank: 2 }]);
        encoders = { layout: "split", image };
        if (scoring === JudgeScoring.Clip) {
          const text = await open("text_encoder", "model.onnx");
          text.validate(
            [
              { name: "input_ids", rank: 2 },
              { name: "attention_mask", rank: 2, optional: true },
            ],
            [{ name: "text_embeds", rank: 2 }],
          );
          encoders.text = text;
          tokenizer = readTokenizer(join(options.dir, "tokenizer"), CLIP_EOS_TOKEN);
        }
      }
      let head: OnnxModel | undefined;
      let headOutput = "p_real";
      if (scoring === JudgeScoring.Head) {
        head = await open("head", "model.onnx");
        headOutput = head.output("p_real") ? "p_real" : (head.outputs[0]?.name ?? "p_real");
        head.validate([{ name: "image_embeds", rank: 2 }], [{ name: headOutput, rank: 2 }]);
      }
      return new OnnxClipJudge(scoring, encoders, head, headOutput, tokenizer, options.windowSize ?? 1000);
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
    const { image, text } = await this.embed(batch, { type: "float32", data: pixels, dims: [n, 3, side, side] });
    let scores: number[];
    if (this.scoring === JudgeScoring.Head && this.head) {
      const out = await this.head.run({ image_embeds: { type: "float32", data: image.data, dims: image.dims } }, [this.headOutput]);
      const values = out[this.headOutput].data;
      const stride = values.length / n;
      const logits = this.headOutput.includes("logit");
      scores = batch.map((_, i) => {
        const v = values[i * stride];
        return logits ? 1 / (1 + Math.exp(-v)) : v;
      });
    } else {
      scores = this.clipScores(n, image.data, text!.data, image.dims[1]);
    }
    // A NaN is a broken model, not a low score: read as 0 it would escalate the image and drag the
    // model's threshold window down.
    const broken = scores.findIndex((s) => !Number.isFinite(s));
    if (broken >= 0)
      throw new HadisError(
        "judge_failed",
        `the judge's score of image ${broken + 1} of ${scores.length} is ${scores[broken]} (a broken model)`,
      );
    const clamped = scores.map((s) => Math.min(Math.max(s, 0), 1));
    batch.forEach((input, i) => this.windows.record(input.model, clamped[i]));
    return clamped;
  }

  /** Image embeddings of the batch, and text embeddings of its prompts when clip scoring needs them (a single-file model gives both in one run). */
  private async embed(
    batch: readonly JudgeInput[],
    pixels: TensorData & { type: "float32" },
  ): Promise<{ image: { data: Float32Array; dims: readonly number[] }; text?: { data: Float32Array } }> {
    const prompts = batch.map((b) => b.prompt);
    if (this.encoders.layout === "single") {
      const { model } = this.encoders;
      const out = await model.run({ pixel_values: pixels, ...tokenFeeds(model, this.tokenizer!, prompts) }, [
        "image_embeds",
        "text_embeds",
      ]);
      return { image: out.image_embeds, text: out.text_embeds };
    }
    const image = (await this.encoders.image.run({ pixel_values: pixels }, ["image_embeds"])).image_embeds;
    const textModel = this.encoders.text;
    if (!textModel) return { image }; // (loaded for clip scoring only)
    return { image, text: (await textModel.run(tokenFeeds(textModel, this.tokenizer!, prompts), ["text_embeds"])).text_embeds };
  }

  /** CLIP image–text cosine similarity of each image and its prompt, mapped to [0, 1]. */
  private clipScores(n: number, imageEmbeds: Float32Array, textEmbeds: Float32Array, dim: number): number[] {
    return Array.from({ length: n }, (_, i) => {
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
    const models = this.encoders.layout === "split" ? [this.encoders.image, this.encoders.text] : [this.encoders.model];
    await Promise.all([...models, this.head].map((m) => m?.release()));
  }
}
