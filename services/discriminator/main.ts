/**
 * The discriminator service: judges light images against the threshold in force.
 * The threshold is a percentile of the light model's score distribution: the plan's
 * `discThreshold` share of images scoring lowest are escalated.
 */
import { HadisError } from "../../contracts/errors.ts";
import { decode, encode } from "../../contracts/envelope.ts";
import { JudgeRequestSchema, PROTOCOL_VERSION, type JudgeReply } from "../../contracts/messages.ts";
import { QueueGroups, ServiceNames, type Subjects } from "../../contracts/subjects.ts";
import type { JudgeBackend } from "../../actors/worker/backend.ts";
import { acceptsLight } from "../../actors/judge/verdict.ts";
import { JudgeQueue } from "../../actors/judge/judge-queue.ts";
import { throttled, type Logger } from "../telemetry/log.ts";
import { sendKeptWhenUp, type MsgHdrs, type NatsConnection } from "../nats/connection.ts";
import { HandlingTally, replyError, startService } from "../nats/replies.ts";
import { recordJudgeExpired, recordVerdict } from "../telemetry/metrics.ts";
import { endWithError, messagingAttributes, ServiceTelemetry, SpanKind } from "../telemetry/tracing.ts";
import { PlanView } from "../nats/plan-view.ts";
import { within, type RunningService } from "../lifecycle/running.ts";

/** Discriminator options. */
export interface DiscriminatorOptions {
  nc: NatsConnection;
  subjects: Subjects;
  judge: JudgeBackend;
  /** The pool's model names: a judge request for any other is refused (`unknown_model`). */
  models: readonly string[];
  log: Logger;
  version?: string;
  /** Judge requests held at once, each with its image (default `MAX_JUDGING`); past it, `overloaded`. */
  maxInFlight?: number;
}

/**
 * Judge requests one discriminator holds at once. Past it a request is refused at once with
 * `overloaded`, which the router answers with the light image: a judge slower than the light
 * images coming (one ONNX thread) otherwise queued them, image and all, without bound, and
 * scored each long after its router had stopped waiting.
 */
export const MAX_JUDGING = 256;

/** Starts a discriminator instance. */
export async function startDiscriminator(opts: DiscriminatorOptions): Promise<RunningService> {
  const { nc, subjects, judge, log } = opts;
  const models = new Set(opts.models);
  const { view: plans } = await PlanView.open(nc, subjects, log);
  const inFlight = new Set<Promise<unknown>>();
  const telemetry = new ServiceTelemetry(ServiceNames.discriminator, nc);
  const refusedBusy = throttled(log, "warn", "discriminator.busy");
  const queue = new JudgeQueue((batch) => judge.score(batch), {
    concurrency: judge.concurrency ?? Infinity,
    maxBatch: judge.maxBatch ?? 1,
    now: Date.now,
    onExpired: recordJudgeExpired,
  });

  async function handle(data: Uint8Array): Promise<JudgeReply> {
    const request = decode(JudgeRequestSchema, data, "judge request");
    // Refused before any work: an unknown name would also open a score window of its own.
    if (!models.has(request.model)) {
      throw new HadisError("unknown_model", `no model "${request.model.slice(0, 64)}" in the pool (${[...models].join(", ")})`, {
        field: "model",
      });
    }
    const startedMs = performance.now();
    let score: number;
    try {
      score = await queue.submit({ prompt: request.prompt, model: request.model, image: request.image }, request.answerByMs);
    } catch (err) {
      // A typed refusal (an expired verdict too) stands; anything else (an error from the judge's thread arrives as
      // `internal`) is the judge failing, which the router answers with the light image.
      if (err instanceof HadisError && err.code !== "internal") throw err;
      throw new HadisError("judge_failed", (err as Error).message, {}, { cause: err });
    }
    // The plan in force when the verdict is given (scoring takes a while), at least the one the
    // router decided under: a discriminator that has just started, or lags a re-plan, waits a
    // little for it rather than judge by an older share (or accept everything with none).
    const plan = await plans.waitForEpoch(request.planEpoch, 500);
    const share = plan?.discThreshold ?? 0;
    const threshold = judge.thresholdFor(request.model, share);
    return {
      v: PROTOCOL_VERSION,
      score,
      threshold,
      accept: acceptsLight(score, threshold, share),
      planEpoch: plan?.epoch ?? 0,
      judgeMs: performance.now() - startedMs,
    };
  }

  /** Judges one request inside a `judge` span continuing the router's trace. */
  async function traced(data: Uint8Array, headers: MsgHdrs | undefined): Promise<JudgeReply> {
    // Only judge requests inside a (sampled) request trace get a span: the discriminator starts no
    // traces, not even for a `traceparent` it cannot read.
    const parent = telemetry.on ? telemetry.extract(headers) : undefined;
    if (!parent) return handle(data).then((r) => (recordVerdict(r.accept), r));
    const span = telemetry.start(
      "judge",
      {
        kind: SpanKind.SERVER,
        attributes: {
          ...messagingAttributes({
            type: "process",
            name: "process",
            destination: subjects.judge,
            consumerGroup: QueueGroups.discriminator,
          }),
          "hadis.judge.backend": judge.kind,
        },
      },
      parent,
    );
    try {
      const reply = await handle(data);
      recordVerdict(reply.accept);
      span.setAttributes({
        "hadis.disc.score": reply.score,
        "hadis.disc.threshold": reply.threshold,
        "hadis.disc.accept": reply.accept,
        "hadis.plan_epoch": reply.planEpoch,
      });
      span.end();
      return reply;
    } catch (err) {
      endWithError(span, err);
      throw err;
    }
  }

  /** Each judge request's whole handling, for `$SRV.STATS`. */
  const handling = new HandlingTally();
  const service = await startService(
    nc,
    {
      name: ServiceNames.discriminator,
      version: opts.version ?? "0.1.0",
      description: `HADIS discriminator (${judge.kind} judge)`,
      metadata: { backend: judge.kind, protocol: String(PROTOCOL_VERSION) },
    },
    { judge: handling },
  );
  service.addEndpoint("judge", {
    subject: subjects.judge,
    queue: QueueGroups.discriminator,
    handler: (_err, msg) => {
      const done = handling.begin();
      if (inFlight.size >= (opts.maxInFlight ?? MAX_JUDGING)) {
        refusedBusy({ inFlight: inFlight.size });
        const busy = new HadisError("overloaded", `the discriminator is judging ${inFlight.size} images already`, { retryAfterMs: 100 });
        replyError(msg, busy, "msgpack");
        done(busy);
        return;
      }
      // A verdict reached while the connection is down is held until it is back (within 10 s):
      // nats.js would drop it, and the router still waits for it. One sent just before a drop
      // goes again once reconnected (it may be lost with the socket).
      const p = traced(msg.data, msg.headers)
        .then(
          (reply) => {
            done();
            return sendKeptWhenUp(nc, () => void msg.respond(encode(reply)));
          },
          (err: unknown) => {
            done(err);
            return sendKeptWhenUp(nc, () => void replyError(msg, err, "msgpack"));
          },
        )
        // A reply that cannot be sent (a closing connection) is logged, not an unhandled rejection.
        .catch((err: unknown) => log.warn("discriminator.reply_failed", { error: (err as Error)?.message ?? String(err) }));
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    },
  });
  log.info("discriminator.started", { backend: judge.kind });
  return {
    name: ServiceNames.discriminator,
    async stop(graceMs = 5_000) {
      await service.stop().catch(() => undefined);
      await within(Promise.allSettled([...inFlight]), graceMs);
      // Past the grace, what still waits for the judge is refused (the router serves its light image), not run on a closing judge.
      queue.close(new HadisError("overloaded", "the discriminator is stopping", { retryAfterMs: 100 }));
      plans.close();
      await telemetry.close();
      await judge.close().catch(() => undefined);
      log.info("discriminator.stopped", {});
    },
  };
}
