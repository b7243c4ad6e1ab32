/**
 * The router service: owns `hadis.generate`. Read top to bottom: the plan view, the router's
 * queued work (`work.ts`), the request stages (`stages.ts`: one request machine per request, its
 * actors bound to NATS), the intake (`intake.ts`: from a message to its reply) on the `generate`
 * and `jobs` endpoints, the load reports (`stats.ts`), and an ordered stop.
 */
import { HadisError } from "../../contracts/errors.ts";
import { PROTOCOL_VERSION, WORKER_SILENT_AFTER_MS, type GenerateReply } from "../../contracts/messages.ts";
import { QueueGroups, ServiceNames, type Subjects } from "../../contracts/subjects.ts";
import type { RequestClock } from "../../actors/request/request-machine.ts";
import type { DifficultyScorer, HardnessThreshold } from "../../actors/routing/difficulty.ts";
import type { ModelRanges } from "../../actors/routing/generation-options.ts";
import type { Logger } from "../telemetry/log.ts";
import { REQUEST_SPAN, ServiceTelemetry } from "../telemetry/tracing.ts";
import { newInbox, type NatsConnection } from "../nats/connection.ts";
import { JobStream, type JobStreamOptions } from "../nats/job-stream.ts";
import { PlanView } from "../nats/plan-view.ts";
import { HandlingTally, startService } from "../nats/replies.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import { within, type RunningService } from "../lifecycle/running.ts";
import { IdempotencyCache } from "./idempotency.ts";
import { createIntake } from "./intake.ts";
import { createStages } from "./stages.ts";
import { RouterTally, startLoadReports } from "./stats.ts";
import { RequestTraces } from "./tracing.ts";
import { startRouterWork } from "./work.ts";

/** Router options. */
export interface RouterOptions {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  scorer: DifficultyScorer;
  threshold: HardnessThreshold;
  /** The artifact's router, used for HADIS and its ablations while the plan runs its `hadis` mechanism. */
  artifactScoring?: { scorer: DifficultyScorer; threshold: HardnessThreshold };
  /** The learned router, used while the plan in force is hadis-plus's (when no scorer was named). */
  learnedScoring?: { scorer: DifficultyScorer; threshold: HardnessThreshold };
  /** SLO used as the default deadline before a plan is known, ms. */
  defaultSloMs: number;
  log: Logger;
  routerId?: string;
  judgeTimeoutMs?: number;
  /**
   * Light items the router will judge ask their worker to judge the image where it is made
   * (default true): a worker holding a judge sends its verdict with the image and no judge call
   * follows. False: every verdict is the discriminator's (workers of an older version refuse the field).
   */
  workerVerdicts?: boolean;
  statsEveryMs?: number;
  version?: string;
  /** Bytes of replies the router remembers by idempotency key (default `IDEMPOTENCY_BYTES`). */
  idempotencyBytes?: number;
  /** The generation settings each model supports (its profile); absent: none, so a request giving settings is refused. */
  rangesOf?: (model: string) => ModelRanges;
  /** How the jobs stream is kept (`hadis.jobs.submit`); false: no jobs endpoint. */
  jobs?: Partial<JobStreamOptions> | false;
  /** A worker silent this long is gone (default `WORKER_SILENT_AFTER_MS`). */
  silentAfterMs?: number;
  /** The clock requests run on (default the wall clock): their deadline timers and the times they read. */
  clock?: RequestClock;
}

/** Replies remembered by idempotency key take at most this much memory: 256 MiB. */
export const IDEMPOTENCY_BYTES = 256 * 1024 * 1024;

/** A running router. */
export interface RunningRouter extends RunningService {
  readonly routerId: string;
  readonly plans: PlanView;
  stats(): { received: number; replied: number; errors: number; inFlight: number; orphanedResults: number };
}

/** The wall clock: a request's deadline timer and the times it reads. */
const wallClock: RequestClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (id) => clearTimeout(id as NodeJS.Timeout),
};

/** Starts a router instance: the plan view, its queued work, the request stages, the intake on its endpoints, its load reports. */
export async function startRouter(opts: RouterOptions): Promise<RunningRouter> {
  const { nc, subjects, log } = opts;
  const clock = opts.clock ?? wallClock;
  const rangesOf = opts.rangesOf ?? ((name: string) => ({ name }));
  const routerId = opts.routerId ?? `r-${newInbox().slice(-10)}`;
  const resultsSubject = subjects.results(routerId);
  const { view: plans } = await PlanView.open(nc, subjects, log);
  const traces = new RequestTraces(new ServiceTelemetry(ServiceNames.router, nc, routerId, REQUEST_SPAN));
  const work = await startRouterWork({
    nc,
    subjects,
    queue: opts.queue,
    plans,
    resultsSubject,
    telemetry: traces.telemetry,
    log,
    silentAfterMs: opts.silentAfterMs ?? WORKER_SILENT_AFTER_MS,
  });
  const tally = new RouterTally();
  const stages = createStages({
    nc,
    subjects,
    queue: opts.queue,
    plans,
    work,
    scorer: opts.scorer,
    threshold: opts.threshold,
    ...(opts.artifactScoring ? { artifactScoring: opts.artifactScoring } : {}),
    ...(opts.learnedScoring ? { learnedScoring: opts.learnedScoring } : {}),
    onEnqueued: (model) => tally.enqueued(model),
    resultsSubject,
    judgeTimeoutMs: opts.judgeTimeoutMs ?? 10_000,
    ...(opts.workerVerdicts === false ? { workerVerdicts: false } : {}),
    rangesOf,
    traces,
    clock,
    log,
  });
  const counters = tally.counters;
  const idempotency = new IdempotencyCache<GenerateReply>(100_000, 10 * 60_000, () => clock.now(), {
    maxBytes: opts.idempotencyBytes ?? IDEMPOTENCY_BYTES,
    sizeOf: (r) => r.image.buffer.byteLength + 1_024,
  });
  const intake = createIntake({
    nc,
    subjects,
    plans,
    stages,
    tally,
    traces,
    idempotency,
    results: work.results,
    defaultSloMs: opts.defaultSloMs,
    rangesOf,
    routerId,
    clock,
    log,
  });

  // Each request's whole handling, for `$SRV.STATS`: errors and processing time as the caller sees them.
  const inFlight = new Set<Promise<unknown>>();
  const handling = new HandlingTally();
  const service = await startService(
    nc,
    {
      name: ServiceNames.router,
      version: opts.version ?? "0.1.0",
      description: "HADIS router: routes each prompt (light, heavy, or light then heavy) under the plan in force",
      metadata: { routerId, protocol: String(PROTOCOL_VERSION) },
      statsHandler: async () => ({
        ...counters,
        errorsByCode: tally.errorsByCode,
        orphanedResults: work.pending.orphaned,
        duplicateResults: work.pending.duplicates,
        malformedResults: work.pending.malformed,
      }),
    },
    { generate: handling },
  );
  service.addEndpoint("generate", {
    subject: subjects.generate,
    queue: QueueGroups.router,
    handler: (_err, msg) => {
      counters.inFlight++;
      const done = handling.begin();
      // A reply that cannot be sent (the connection closing under a late request) is logged:
      // it must not become an unhandled rejection, which would end the process.
      const p = intake
        .handle(msg)
        .then(done, (err: unknown) => {
          done(err);
          log.warn("router.reply_failed", { error: (err as Error)?.message ?? String(err) });
        })
        .finally(() => {
          counters.inFlight--;
          inFlight.delete(p);
        });
      inFlight.add(p);
    },
  });
  // Asynchronous jobs, on the same queue group: any router takes a submission.
  const jobs = opts.jobs === false ? null : await JobStream.open(nc, subjects, opts.jobs);
  if (jobs) {
    service.addEndpoint("jobs", {
      subject: subjects.jobsSubmit,
      queue: QueueGroups.router,
      handler: (_err, msg) => {
        counters.inFlight++;
        const p = intake
          .handle(msg, jobs)
          .catch((err: unknown) => log.warn("router.job_failed", { error: (err as Error)?.message ?? String(err) }))
          .finally(() => {
            counters.inFlight--;
            inFlight.delete(p);
          });
        inFlight.add(p);
      },
    });
  }
  const reports = startLoadReports(nc, subjects, routerId, tally, opts.statsEveryMs ?? 1_000);

  log.info("router.started", { routerId, subject: subjects.generate });
  return {
    name: ServiceNames.router,
    routerId,
    plans,
    stats: () => ({
      received: counters.received,
      replied: counters.replied,
      errors: counters.errors,
      inFlight: counters.inFlight,
      orphanedResults: work.pending.orphaned,
    }),
    async stop(graceMs = 10_000) {
      intake.close();
      reports.stop();
      work.stopSweeping();
      await service.stop().catch(() => undefined);
      const finished = await within(Promise.allSettled([...inFlight]), graceMs);
      if (!finished) {
        log.warn("router.stop_grace_exceeded", { inFlight: inFlight.size });
        stages.abandonAll(
          new HadisError("overloaded", `router stopped before this request finished (grace ${graceMs} ms): retry`, { retryAfterMs: 100 }),
        );
        await within(Promise.allSettled([...inFlight]), 1_000);
      }
      // The last, partial interval: without it the requests of a router's last second go uncounted.
      if (!nc.isClosed()) reports.report();
      work.stop();
      plans.close();
      await traces.telemetry.close();
      log.info("router.stopped", { routerId });
    },
  };
}
