/**
 * The building blocks of the tiny ONNX exports (make-tiny-models.ts, tiny-sd3.ts): seeded
 * weights, an ONNX graph builder, a CLIP-like text tower, and CLIP tokenizer files over a small
 * vocabulary of real CLIP ids.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import onnxProto from "onnx-proto";
import type * as OnnxTypes from "onnx-proto";
import { bytesToUnicode } from "../actors/diffusion/tokenizer.ts";

export const { onnx } = onnxProto;
export const DataType = onnx.TensorProto.DataType;
const AttrType = onnx.AttributeProto.AttributeType;
export type Dim = number | string;
export type ElemType = "float32" | "int32" | "int64";

/** Tiny vocabulary size the embeddings cover; ids are taken modulo this inside the graph. */
export const EMBED_ROWS = 997;
export const SEQ = 77;

export class Weights {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Uniform in ±scale. */
  tensor(count: number, scale: number): Float32Array {
    return Float32Array.from({ length: count }, () => (this.uniform() * 2 - 1) * scale);
  }
}

export class GraphBuilder {
  readonly nodes: OnnxTypes.onnx.INodeProto[] = [];
  readonly inits: OnnxTypes.onnx.ITensorProto[] = [];
  readonly inputs: OnnxTypes.onnx.IValueInfoProto[] = [];
  readonly outputs: OnnxTypes.onnx.IValueInfoProto[] = [];
  private counter = 0;

  private valueInfo(name: string, type: ElemType, dims: Dim[]): OnnxTypes.onnx.IValueInfoProto {
    const elemType = { float32: DataType.FLOAT, int32: DataType.INT32, int64: DataType.INT64 }[type];
    return {
      name,
      type: {
        tensorType: {
          elemType,
          shape: { dim: dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) },
        },
      },
    };
  }
  input(name: string, type: ElemType, dims: Dim[]): string {
    this.inputs.push(this.valueInfo(name, type, dims));
    return name;
  }
  output(value: string, name: string, type: ElemType, dims: Dim[]): void {
    this.node("Identity", [value], [name]);
    this.outputs.push(this.valueInfo(name, type, dims));
  }
  float(dims: number[], data: Float32Array): string {
    const name = `w${this.counter++}`;
    this.inits.push({ name, dims, dataType: DataType.FLOAT, rawData: new Uint8Array(data.buffer.slice(0)) });
    return name;
  }
  int(dims: number[], values: number[], type: "int32" | "int64" = "int64"): string {
    const name = `c${this.counter++}`;
    const raw =
      type === "int64" ? new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer) : new Uint8Array(Int32Array.from(values).buffer);
    this.inits.push({ name, dims, dataType: type === "int64" ? DataType.INT64 : DataType.INT32, rawData: raw });
    return name;
  }
  node(op: string, inputs: string[], outputs?: string[], attrs: Record<string, number | number[]> = {}): string {
    const out = outputs ?? [`t${this.counter++}`];
    const attribute = Object.entries(attrs).map(([name, v]) =>
      Array.isArray(v)
        ? { name, type: AttrType.INTS, ints: v }
        : Number.isInteger(v)
          ? { name, type: AttrType.INT, i: v }
          : { name, type: AttrType.FLOAT, f: v },
    );
    this.nodes.push({ opType: op, input: inputs, output: out, name: `n${this.counter++}`, attribute });
    return out[0];
  }
  encode(name: string): Uint8Array {
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: "hadis-ts make-tiny-models",
      opsetImport: [{ domain: "", version: 17 }],
      graph: { name, node: this.nodes, initializer: this.inits, input: this.inputs, output: this.outputs },
    });
    return onnx.ModelProto.encode(model).finish();
  }
}

export interface TextEncoderSpec {
  idType: "int32" | "int64";
  hidden: number;
  layers: number;
  /** Write `hidden_states.0..layers` outputs (as exports with output_hidden_states). */
  hiddenStates: boolean;
  /** CLIPTextModelWithProjection: `text_embeds` of this size instead of `pooler_output`. */
  projection?: number;
  /** Take an `attention_mask` too, and zero the last hidden state where it is 0 (so a test sees which mask was fed). */
  maskInput?: boolean;
}

export function textEncoder(w: Weights, spec: TextEncoderSpec): Uint8Array {
  const g = new GraphBuilder();
  const ids = g.input("input_ids", spec.idType, ["batch", "sequence"]);
  const mask = spec.maskInput ? g.input("attention_mask", spec.idType, ["batch", "sequence"]) : undefined;
  textTower(g, w, spec, ids, mask);
  return g.encode("text_encoder");
}

/** A CLIP-like text tower on `ids` in `g`, with the outputs `spec` asks for. */
export function textTower(g: GraphBuilder, w: Weights, spec: TextEncoderSpec, ids: string, mask?: string): void {
  const D = spec.hidden;
  const idx = g.node("Mod", [ids, g.int([], [EMBED_ROWS], spec.idType)], undefined, { fmod: 0 });
  const emb = g.node("Gather", [g.float([EMBED_ROWS, D], w.tensor(EMBED_ROWS * D, 1)), idx], undefined, { axis: 0 });
  const states = [g.node("Add", [emb, g.float([SEQ, D], w.tensor(SEQ * D, 0.5))])];
  for (let l = 0; l < spec.layers; l++) {
    const mm = g.node("MatMul", [states[l], g.float([D, D], w.tensor(D * D, 1 / Math.sqrt(D)))]);
    states.push(g.node("Tanh", [g.node("Add", [mm, g.float([D], w.tensor(D, 0.1))])]));
  }
  let last = states[states.length - 1];
  if (mask) {
    const m = g.node("Unsqueeze", [g.node("Cast", [mask], undefined, { to: DataType.FLOAT }), g.int([1], [2])]);
    last = g.node("Mul", [last, m]);
  }
  const pooled = g.node("ReduceMean", [last], undefined, { axes: [1], keepdims: 0 });
  if (spec.projection) {
    const P = spec.projection;
    g.output(g.node("MatMul", [pooled, g.float([D, P], w.tensor(D * P, 0.5))]), "text_embeds", "float32", ["batch", P]);
  }
  g.output(last, "last_hidden_state", "float32", ["batch", "sequence", D]);
  if (!spec.projection) g.output(pooled, "pooler_output", "float32", ["batch", D]);
  if (spec.hiddenStates) states.forEach((s, i) => g.output(s, `hidden_states.${i}`, "float32", ["batch", "sequence", D]));
}

/** A VAE decoder of the usual layout: `latent_sample` [B, channels, h, w] in, `sample` [B, 3, 8h, 8w] out. */
export function vaeDecoder(w: Weights, channels: number): Uint8Array {
  const g = new GraphBuilder();
  const z = g.input("latent_sample", "float32", ["batch", channels, "latent_height", "latent_width"]);
  const conv = g.node("Conv", [
    z,
    g.float([192, channels, 1, 1], w.tensor(192 * channels, 0.6 * Math.sqrt(4 / channels))),
    g.float([192], w.tensor(192, 0.2)),
  ]);
  const image = g.node("Tanh", [g.node("DepthToSpace", [conv], undefined, { blocksize: 8 })]);
  g.output(image, "sample", "float32", ["batch", 3, "image_height", "image_width"]);
  return g.encode("vae_decoder");
}

/**
 * A small real CLIP-layout vocabulary: the 256 byte symbols and their `</w>` forms at their
 * CLIP ids (0–511), bos/eos at 49406/49407, and merges building a few whole words whose
 * final tokens carry their published CLIP ids (a 320, photo 1125, of 539, cat 2368,
 * hello 3306, world 1002). Intermediate merge tokens use ids from 40000 up (not CLIP's).
 */
export function tinyClipVocab(): { vocab: Record<string, number>; merges: string } {
  const vocab: Record<string, number> = {};
  const chars = bytesToUnicode();
  const order: string[] = [];
  for (let b = 33; b <= 126; b++) order.push(chars[b]);
  for (let b = 161; b <= 172; b++) order.push(chars[b]);
  for (let b = 174; b <= 255; b++) order.push(chars[b]);
  for (let b = 0; b < 256; b++) if (!order.includes(chars[b])) order.push(chars[b]);
  order.forEach((c, i) => {
    vocab[c] = i;
    vocab[`${c}</w>`] = 256 + i;
  });
  const words: [string[], string, number][] = [
    [["o f</w>"], "of</w>", 539],
    [["p h", "ph o", "pho t", "phot o</w>"], "photo</w>", 1125],
    [["c a", "ca t</w>"], "cat</w>", 2368],
    [["h e", "l l", "he ll", "hell o</w>"], "hello</w>", 3306],
    [["w o", "r l", "wo rl", "worl d</w>"], "world</w>", 1002],
  ];
  const merges: string[] = ["#version: 0.2"];
  let next = 40000;
  for (const [steps, final, id] of words) {
    for (const step of steps) {
      merges.push(step);
      const token = step.replace(" ", "");
      if (vocab[token] === undefined) vocab[token] = token === final ? id : next++;
    }
  }
  vocab["<|startoftext|>"] = 49406;
  vocab["<|endoftext|>"] = 49407;
  return { vocab, merges: merges.join("\n") + "\n" };
}

export function writeTokenizer(dir: string, padToken: string): void {
  mkdirSync(dir, { recursive: true });
  const { vocab, merges } = tinyClipVocab();
  writeFileSync(join(dir, "vocab.json"), JSON.stringify(vocab));
  writeFileSync(join(dir, "merges.txt"), merges);
  writeFileSync(
    join(dir, "tokenizer_config.json"),
    JSON.stringify(
      {
        tokenizer_class: "CLIPTokenizer",
        model_max_length: SEQ,
        pad_token: padToken,
        bos_token: "<|startoftext|>",
        eos_token: "<|endoftext|>",
        unk_token: "<|endoftext|>",
        do_lower_case: true,
      },
      null,
      2,
    ),
  );
}

export function writeFile(dir: string, name: string, data: Uint8Array | string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, name), data);
}
