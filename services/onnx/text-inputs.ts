/** What the pipelines and the CLIP judge read text with: JSON files, CLIP and T5 tokenizers, and token tensors for a text encoder. */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ClipTokenizer, padTokenFromConfig } from "../../actors/diffusion/tokenizer.ts";
import { unigramFromJson, type UnigramTokenizer } from "../../actors/diffusion/unigram.ts";
import type { OnnxModel, TensorData, ValueSpec } from "./runtime.ts";
import { ModelExportError } from "../../contracts/errors.ts";

/** The inputs of a text encoder export: ids, and a mask when it takes one. */
export const TEXT_INPUTS: readonly ValueSpec[] = [
  { name: "input_ids", rank: 2 },
  { name: "attention_mask", rank: 2, optional: true },
];

/**
 * Several text encoders' per-token embeddings joined on the feature axis: row r of the output is
 * each part's row r side by side, then zeros up to `width` (SD3 pads its CLIP rows to the T5 width).
 */
export function sideBySide(
  parts: readonly { data: Float32Array; dim: number }[],
  rows: number,
  width: number,
  out = new Float32Array(rows * width),
): Float32Array {
  for (let row = 0; row < rows; row++) {
    let offset = row * width;
    for (const p of parts) {
      out.set(p.data.subarray(row * p.dim, (row + 1) * p.dim), offset);
      offset += p.dim;
    }
  }
  return out;
}

/** The summed width of text encoders' per-token outputs as their models declare them; undefined when any is not fixed. */
export function declaredWidth(outputs: readonly { model: OnnxModel; output: string }[]): number | undefined {
  return outputs.reduce<number | undefined>((sum, o) => {
    const d = o.model.output(o.output)?.shape[2];
    return typeof d === "number" && sum !== undefined ? sum + d : undefined;
  }, 0);
}

/** A JSON file; errors name it. */
export function readJson(file: string): Record<string, unknown> {
  if (!existsSync(file)) throw new ModelExportError(`${file}: missing file`);
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (err) {
    throw new ModelExportError(`${file}: invalid JSON: ${(err as Error).message}`, { cause: err });
  }
}

/** The CLIP tokenizer of `dir` (vocab.json, merges.txt, optional tokenizer_config.json); `defaultPad` when the config names none. */
export function readTokenizer(dir: string, defaultPad: string): ClipTokenizer {
  const vocabFile = join(dir, "vocab.json");
  const mergesFile = join(dir, "merges.txt");
  if (!existsSync(mergesFile)) throw new ModelExportError(`${mergesFile}: missing file`);
  const configFile = join(dir, "tokenizer_config.json");
  const config = existsSync(configFile) ? readJson(configFile) : {};
  const maxLength = typeof config.model_max_length === "number" && config.model_max_length < 1e6 ? config.model_max_length : 77;
  return new ClipTokenizer(readJson(vocabFile) as Record<string, number>, readFileSync(mergesFile, "utf8"), {
    padToken: padTokenFromConfig(config) ?? defaultPad,
    maxLength,
  });
}

/** What `tokenFeeds` needs of a tokenizer: ids with the special tokens, and padding to a fixed length. */
export type TextTokenizer = Pick<ClipTokenizer, "maxLength" | "encode" | "padded">;

/**
 * The T5 tokenizer of `dir` (`tokenizer.json`, Unigram; `tokenizer_config.json` for the eos and
 * pad tokens when it names them), padded to `maxLength` (SD3 reads 256 tokens, whatever the
 * tokenizer's own limit).
 */
export function readT5Tokenizer(dir: string, maxLength: number): UnigramTokenizer {
  const configFile = join(dir, "tokenizer_config.json");
  const config = existsSync(configFile) ? readJson(configFile) : {};
  const eos = typeof config.eos_token === "string" ? config.eos_token : undefined;
  const file = join(dir, "tokenizer.json");
  const json = readJson(file);
  try {
    return unigramFromJson(json, maxLength, { eos, pad: padTokenFromConfig(config) });
  } catch (err) {
    throw new ModelExportError(`${file}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * `input_ids` of the prompts padded to the tokenizer's length, and `attention_mask` when the model
 * takes one, in the model's integer type. The mask covers the tokens (`padding`: what a CLIP
 * processor gives, for the judge) or every position (`none`: no mask, what diffusers' pipelines
 * run their text encoders with; padding rows then differ, and the denoiser attends to all of them).
 */
export function tokenFeeds(
  model: OnnxModel,
  tokenizer: TextTokenizer,
  prompts: readonly string[],
  mask: "padding" | "none" = "padding",
): Record<string, TensorData> {
  const n = prompts.length;
  const seq = tokenizer.maxLength;
  const int64 = model.input("input_ids")?.type === "int64";
  const tensor = (values: number[]): TensorData =>
    int64
      ? { type: "int64", data: BigInt64Array.from(values, (v) => BigInt(v)), dims: [n, seq] }
      : { type: "int32", data: Int32Array.from(values), dims: [n, seq] };
  const encoded = prompts.map((p) => tokenizer.encode(p));
  const feeds: Record<string, TensorData> = { input_ids: tensor(encoded.flatMap((ids) => tokenizer.padded(ids))) };
  if (model.input("attention_mask")) {
    feeds.attention_mask = tensor(
      encoded.flatMap((ids) => Array.from({ length: seq }, (_, i) => (mask === "none" || i < ids.length ? 1 : 0))),
    );
  }
  return feeds;
}
