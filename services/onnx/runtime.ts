/**
 * The one module that imports onnxruntime-node: opening sessions, checking their declared
 * inputs and outputs against what the pipeline feeds them, and running them with plain
 * typed arrays in and out, so the rest of the code never touches ORT types.
 */
import { existsSync } from "node:fs";
import ort from "onnxruntime-node";
import { ModelExportError } from "../../contracts/errors.ts";

/** Session options every model shares. */
export interface RuntimeOptions {
  /** Execution providers in preference order (default `["cpu"]`). */
  executionProviders?: string[];
  /** Intra-op thread count (default: ORT's choice). */
  intraOpNumThreads?: number;
}

/** Element types the pipeline feeds and reads. */
export type TensorType = "float32" | "int32" | "int64";

/** One declared model input or output. */
export interface ValueInfo {
  name: string;
  type: string;
  /** Dimensions: numbers for fixed sizes, strings for symbolic ones; empty when unknown. */
  shape: readonly (number | string)[];
}

/** An expected input or output: its name and rank. */
export interface ValueSpec {
  name: string;
  rank: number;
  /** Absent values are tolerated (optional inputs and outputs). */
  optional?: boolean;
}

/** A tensor handed to or received from a session. */
export interface TensorData {
  type: TensorType;
  data: Float32Array | Int32Array | BigInt64Array;
  dims: readonly number[];
}

/** An opened model file with its declared I/O. */
export class OnnxModel {
  private constructor(
    /** The model file, for error messages. */
    readonly file: string,
    private session: ort.InferenceSession | undefined,
    readonly inputs: readonly ValueInfo[],
    readonly outputs: readonly ValueInfo[],
  ) {}

  /** Opens `file`; a missing file throws an error naming it. */
  static async open(file: string, options: RuntimeOptions = {}): Promise<OnnxModel> {
    if (!existsSync(file)) throw new ModelExportError(`${file}: missing model file`);
    let session: ort.InferenceSession;
    try {
      session = await ort.InferenceSession.create(file, {
        executionProviders: options.executionProviders ?? ["cpu"],
        ...(options.intraOpNumThreads ? { intraOpNumThreads: options.intraOpNumThreads } : {}),
        graphOptimizationLevel: "all",
      });
    } catch (err) {
      throw new ModelExportError(`${file}: cannot load model: ${(err as Error).message}`, { cause: err });
    }
    const info = (m: ort.InferenceSession.ValueMetadata): ValueInfo =>
      m.isTensor ? { name: m.name, type: m.type, shape: m.shape } : { name: m.name, type: "non-tensor", shape: [] };
    return new OnnxModel(file, session, session.inputMetadata.map(info), session.outputMetadata.map(info));
  }

  /** The declared input named `name`, if any. */
  input(name: string): ValueInfo | undefined {
    return this.inputs.find((v) => v.name === name);
  }

  /** The declared output named `name`, if any. */
  output(name: string): ValueInfo | undefined {
    return this.outputs.find((v) => v.name === name);
  }

  /**
   * Checks declared names and ranks: a required input/output that is missing, a rank that
   * differs, or a required model input the caller will not feed throws, naming the file.
   */
  validate(inputs: readonly ValueSpec[], outputs: readonly ValueSpec[]): void {
    const check = (kind: "input" | "output", declared: readonly ValueInfo[], specs: readonly ValueSpec[]) => {
      for (const spec of specs) {
        const found = declared.find((v) => v.name === spec.name);
        if (!found) {
          if (spec.optional) continue;
          throw new ModelExportError(
            `${this.file}: missing ${kind} "${spec.name}" (model declares: ${declared.map((v) => v.name).join(", ") || "none"})`,
          );
        }
        if (found.shape.length > 0 && found.shape.length !== spec.rank) {
          throw new ModelExportError(
            `${this.file}: ${kind} "${spec.name}" has rank ${found.shape.length} [${found.shape.join(", ")}], expected rank ${spec.rank}`,
          );
        }
      }
    };
    check("input", this.inputs, inputs);
    check("output", this.outputs, outputs);
    const fed = new Set(inputs.map((s) => s.name));
    const unfed = this.inputs.filter((v) => !fed.has(v.name));
    if (unfed.length > 0) {
      throw new ModelExportError(
        `${this.file}: unexpected input(s) ${unfed.map((v) => `"${v.name}"`).join(", ")} that the pipeline does not provide`,
      );
    }
  }

  /** Runs the session; returns only the requested outputs as float32 data. */
  async run(
    feeds: Record<string, TensorData>,
    outputNames: readonly string[],
  ): Promise<Record<string, { data: Float32Array; dims: number[] }>> {
    if (!this.session) throw new Error(`${this.file}: session already released`);
    const ortFeeds: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(feeds)) ortFeeds[name] = new ort.Tensor(t.type, t.data, t.dims);
    const results = await this.session.run(ortFeeds, outputNames);
    const out: Record<string, { data: Float32Array; dims: number[] }> = {};
    for (const name of outputNames) {
      const tensor = results[name];
      if (!tensor) throw new ModelExportError(`${this.file}: run returned no output "${name}"`);
      if (tensor.type !== "float32") throw new ModelExportError(`${this.file}: output "${name}" is ${tensor.type}, expected float32`);
      out[name] = { data: tensor.data as Float32Array, dims: [...tensor.dims] };
    }
    return out;
  }

  /** Frees the native session; later runs throw. */
  async release(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    await session?.release();
  }
}

/** The onnxruntime-node version in use, for profile provenance. */
export const ONNXRUNTIME_VERSION: string = ort.env.versions?.common ?? "unknown";
