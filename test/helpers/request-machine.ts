/** Running the request machine on a simulated clock, for unit tests of its decisions. */
import { toPromise, type SimulatedClock } from "xstate";
import type { createRequestActor } from "../../actors/request/request-machine.ts";
import type { GenerateOutcome, RequestOutcome } from "../../actors/request/types.ts";

/** Starts `actor` and advances `clock` 5 ms at a time (promise callbacks running between steps) until the request ends, 20 s at most. */
export async function runToEnd(actor: ReturnType<typeof createRequestActor>, clock: SimulatedClock): Promise<RequestOutcome> {
  actor.start();
  const done = toPromise(actor) as Promise<RequestOutcome>;
  for (let t = 0; t < 20_000 && actor.getSnapshot().status === "active"; t += 5) {
    await Promise.resolve();
    await Promise.resolve();
    clock.increment(5);
  }
  return done;
}

/** An 8×8 image of `model` made by worker w1 in a batch of one, as a fake generate actor returns it. */
export function madeBy(model: string, execMs: number, byte = 1): GenerateOutcome {
  return { image: new Uint8Array([byte]), width: 8, height: 8, model, workerId: "w1", batchSize: 1, queueWaitMs: 0, execMs };
}
