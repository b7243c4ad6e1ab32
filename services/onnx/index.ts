/** The ONNX backends for the worker and discriminator services (threaded), and the pipeline under them. */
export { ThreadedClipJudge, ThreadedGenerationBackend } from "./threaded.ts";
export { OnnxGenerationBackend, type OnnxGenerationBackendOptions, type OnnxModelEntry } from "./generation-backend.ts";
export { OnnxClipJudge, JudgeScoring, type OnnxClipJudgeOptions } from "./clip-judge.ts";
export { OnnxDiffusionPipeline, type PipelineInfo, type PipelineOptions } from "./pipeline.ts";
export type { RuntimeOptions } from "./runtime.ts";
