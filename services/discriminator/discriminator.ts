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
import type { Logger } from "../lib/log.ts";
import { replyError, startService, type NatsConnection } from "../lib/nats.ts";
import { PlanView } from "../lib/plan-view.ts";
import { within, type RunningService } from "../lib/running.ts";

/** Discriminator options. */
export interface DiscriminatorOptions {
  nc: NatsConnection;
  subjects: Subjects;
  judge: JudgeBackend;
  log: Logger;
  version?: string;
}

/** Starts a discriminator instance. */
export async function startDiscriminator(opts: DiscriminatorOptions): Promise<RunningService> {
  const { nc, subjects, judge, log } = opts;
  const { view: plans } = await PlanView.open(nc, subjects, log);
  const inFlight = new Set<Promise<unknown>>();

  async function handle(data: Uint8Array): Promise<JudgeReply> {
    const request = decode(JudgeRequestSchema, data, "judge request");
    const plan = plans.current;
    const share = plan?.discThreshold ?? 0;
    const startedMs = performance.now();
    let score: number;
    try {
      [score] = await judge.score([{ prompt: request.prompt, model: request.model, image: request.image }]);
    } catch (err) {
      if (err instanceof HadisError) throw err;
      throw new HadisError("judge_failed", (err as Error).message, {}, { cause: err });
    }
    const threshold = judge.thresholdFor(request.model, share);
    return {
      v: PROTOCOL_VERSION,
      score,
      threshold,
      accept: share <= 0 || score >= threshold,
      planEpoch: plan?.epoch ?? 0,
      judgeMs: performance.now() - startedMs,
    };
  }

  const service = await startService(nc, {
    name: ServiceNames.discriminator,
    version: opts.version ?? "0.1.0",
    description: `HADIS discriminator (${judge.kind} judge)`,
    metadata: { backend: judge.kind, protocol: String(PROTOCOL_VERSION) },
  });
  service.addEndpoint("judge", {
    subject: subjects.judge,
    queue: QueueGroups.discriminator,
    handler: (_err, msg) => {
      const p = handle(msg.data).then(
        (reply) => msg.respond(encode(reply)),
        (err) => replyError(msg, err, "msgpack"),
      );
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
      plans.close();
      await judge.close().catch(() => undefined);
      log.info("discriminator.stopped", {});
    },
  };
}
