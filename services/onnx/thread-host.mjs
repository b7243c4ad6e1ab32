/**
 * Entry of an ONNX worker thread: registers tsx's loader here (a worker may not have the
 * parent's `--import tsx`, e.g. under the test runner) and runs the TypeScript thread module.
 * Plain JavaScript because nothing can load TypeScript before this line runs.
 */
import { register } from "tsx/esm/api";

register();
await import(new URL("./onnx-thread.ts", import.meta.url).href);
