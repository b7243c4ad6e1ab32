/**
 * The inside of an ONNX worker thread (`thread-client.ts` is the outside): builds one backend
 * from `workerData` (a generation backend or a CLIP judge), says `ready` (or why it could not
 * load), then runs each method call as its message arrives and answers it by id (the generation
 * backend serialises its own calls). onnxruntime-node runs a session
 * synchronously on the thread that calls it, so only here does a seconds-long UNet step not
 * stall the services' event loop (heartbeats, JetStream's in-progress acks, NATS pings).
 */
import { parentPort, workerData } from "node:worker_threads";
import { toWireError } from "../../contracts/errors.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { OnnxClipJudge, type OnnxClipJudgeOptions } from "./clip-judge.ts";
import { OnnxGenerationBackend, type OnnxGenerationBackendOptions } from "./generation-backend.ts";
import type { ThreadCall, ThreadInit, ThreadReply } from "./thread-protocol.ts";

type Methods = Record<string, (...args: never[]) => Promise<unknown>>;

async function build(init: ThreadInit): Promise<Methods> {
  if (init.kind === "generation") {
    const backend = new OnnxGenerationBackend(init.options as OnnxGenerationBackendOptions);
    return {
      load: (model: string) => backend.load(model),
      unload: (model: string) => backend.unload(model),
      generate: (model: string, batch: Parameters<OnnxGenerationBackend["generate"]>[1]) => backend.generate(model, batch),
      close: () => backend.close(),
    };
  }
  const judge = await OnnxClipJudge.load(init.options as OnnxClipJudgeOptions);
  return { score: (batch: Parameters<OnnxClipJudge["score"]>[0]) => judge.score(batch), close: () => judge.close() };
}

const port = parentPort!;
const post = (reply: ThreadReply) => port.postMessage(reply);

try {
  const methods = await build(workerData as ThreadInit);
  port.on("message", (call: ThreadCall) => {
    const method = methods[call.op];
    const run = method ? method(...(call.args as never[])) : Promise.reject(new Error(`onnx thread: no method "${call.op}"`));
    run.then(
      (value) => post({ id: call.id, ok: true, value }),
      (err: unknown) => post({ id: call.id, ok: false, error: toWireError(err, PROTOCOL_VERSION) }),
    );
  });
  post({ id: 0, ok: true, value: "ready" });
} catch (err) {
  post({ id: 0, ok: false, error: toWireError(err, PROTOCOL_VERSION) });
}
