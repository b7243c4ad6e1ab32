/**
 * The router's real actors for the request machine: enqueue to a model's JetStream work queue
 * and wait for the worker's result on this router's inbox; ask the discriminator; route by plan.
 */
import { fromPromise } from "xstate";
import { fromWireError, HadisError, isWireError } from "../../contracts/errors.ts";
import { decode, encode, parseRaw } from "../../contracts/envelope.ts";
import { JudgeReplySchema, PROTOCOL_VERSION, WorkResultSchema, type WorkItem, type WorkResult } from "../../contracts/messages.ts";
import { Headers, type Subjects } from "../../contracts/subjects.ts";
import type { GenerateCall, GenerateOutcome, JudgeCall, JudgeOutcome, RouteDecision } from "../../actors/request/types.ts";
import { decideRoute } from "../../actors/routing/route-policy.ts";
import type { DifficultyScorer, HardnessThreshold } from "../../actors/routing/difficulty.ts";
import type { Logger } from "../lib/log.ts";
import type { NatsConnection, WorkQueue } from "../lib/nats.ts";
import type { PlanView } from "../lib/plan-view.ts";

interface Waiter {
  resolve(result: GenerateOutcome): void;
  reject(err: unknown): void;
}

/** Results awaited by this router, keyed by request id and model. */
export class PendingResults {
  private readonly waiters = new Map<string, Waiter>();
  /** Results that matched no waiter (late, after expiry), by reason. */
  orphaned = 0;
  malformed = 0;

  private static key(requestId: string, model: string): string {
    return `${requestId}/${model}`;
  }

  /** Registers interest in a result; the returned function cancels it. */
  wait(requestId: string, model: string, waiter: Waiter): () => void {
    const key = PendingResults.key(requestId, model);
    this.waiters.set(key, waiter);
    return () => this.waiters.delete(key);
  }

  /** Delivers an encoded work result to its waiter. */
  deliver(data: Uint8Array): void {
    let result: WorkResult;
    try {
      result = decode(WorkResultSchema, data, "work result");
    } catch {
      this.malformed++;
      return;
    }
    const key = PendingResults.key(result.requestId, result.model);
    const waiter = this.waiters.get(key);
    if (!waiter) {
      this.orphaned++;
      return;
    }
    this.waiters.delete(key);
    if (result.ok) {
      waiter.resolve({
        image: result.image,
        width: result.width,
        height: result.height,
        model: result.model,
        workerId: result.workerId,
        batchSize: result.batchSize,
        queueWaitMs: result.queueWaitMs,
        execMs: result.execMs,
      });
    } else {
      waiter.reject(fromWireError({ v: PROTOCOL_VERSION, error: result.error as never }));
    }
  }

  get size(): number {
    return this.waiters.size;
  }
}

/** What the router's actors need. */
export interface RouterActorDeps {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  pending: PendingResults;
  plans: PlanView;
  scorer: DifficultyScorer;
  threshold: HardnessThreshold;
  resultsSubject: string;
  judgeTimeoutMs: number;
  /** How long a request waits for the first plan before failing. */
  planWaitMs: number;
  log: Logger;
}

/** The route, generate and judge actors bound to NATS. */
export function routerActors(deps: RouterActorDeps) {
  const route = fromPromise<RouteDecision, { prompt: string; requestId: string }>(async ({ input }) => {
    const plan = deps.plans.current ?? (await deps.plans.waitForPlan(deps.planWaitMs));
    if (!plan) throw new HadisError("no_capacity", "no plan in force yet: is the resource manager running?");
    return decideRoute(plan, input.prompt, input.requestId, deps.scorer, deps.threshold);
  });

  const generate = fromPromise<GenerateOutcome, GenerateCall>(async ({ input, signal }) => {
    const item: WorkItem = {
      v: PROTOCOL_VERSION,
      requestId: input.requestId,
      prompt: input.prompt,
      seed: input.seed,
      model: input.model,
      replyTo: deps.resultsSubject,
      enqueuedAtMs: Date.now(),
      deadlineAtMs: input.deadlineAtMs,
      planEpoch: input.planEpoch,
    };
    let cancel: () => void = () => {};
    const result = new Promise<GenerateOutcome>((resolve, reject) => {
      cancel = deps.pending.wait(input.requestId, input.model, { resolve, reject });
      signal.addEventListener("abort", () => {
        cancel();
        reject(new HadisError("deadline_exceeded", "request ended"));
      }, { once: true });
    });
    // The request may end (deadline) while the publish is in flight: nobody awaits `result` then.
    result.catch(() => undefined);
    try {
      await deps.queue.publish(input.model, encode(item), `${input.requestId}/${input.model}`);
    } catch (err) {
      cancel();
      const message = (err as Error).message ?? String(err);
      if (/maximum messages|resource limits|exceeded/i.test(message)) {
        throw new HadisError("overloaded", `work queue of ${input.model} is full`, { retryAfterMs: 1_000 }, { cause: err });
      }
      throw new HadisError("no_capacity", `cannot enqueue for ${input.model}: ${message}`, {}, { cause: err });
    }
    return result;
  });

  const judge = fromPromise<JudgeOutcome, JudgeCall>(async ({ input }) => {
    const reply = await deps.nc.request(
      deps.subjects.judge,
      encode({ v: PROTOCOL_VERSION, requestId: input.requestId, prompt: input.prompt, model: input.model, image: input.image, planEpoch: input.planEpoch }),
      { timeout: deps.judgeTimeoutMs },
    );
    if (reply.headers?.get(Headers.serviceErrorCode)) {
      const body = parseRaw(reply.data);
      throw isWireError(body) ? fromWireError(body) : new HadisError("judge_failed", reply.headers.get(Headers.serviceError));
    }
    const verdict = decode(JudgeReplySchema, reply.data, "judge reply");
    return { score: verdict.score, threshold: verdict.threshold, accept: verdict.accept };
  });

  return { route, generate, judge };
}
