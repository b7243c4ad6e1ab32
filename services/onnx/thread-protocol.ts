/** Messages between an ONNX worker thread and its client (structured clone, no transfers). */
import type { WireError } from "../../contracts/errors.ts";

/** What the thread builds: its `workerData`. */
export interface ThreadInit {
  kind: "generation" | "judge";
  options: unknown;
}

/** A method call; ids start at 1 (0 is the thread's start-up report). */
export interface ThreadCall {
  id: number;
  op: string;
  args: unknown[];
}

/** The answer to call `id`, or (id 0) whether the thread's backend loaded. */
export type ThreadReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: WireError };
