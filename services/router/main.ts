/**
 * The router service: owns `hadis.generate`. Each request gets one request machine
 * (route → light → judge → heavy) whose actors are bound to NATS here.
 */
import { randomInt } from "node:crypto";
import { createActor, toPromise } from "xstate";
import { asHadisError, HadisError } from "../../contracts/errors.ts";
import { encode, parseRaw, validate, type Encoding } from "../../contracts/envelope.ts";
import { deadlineOf, GenerateRequestSchema, PROTOCOL_VERSION, WORKER_SILENT_AFTER_MS, type GenerateReply, type Plan, type RouterStats } from "../../contracts/messages.ts";
import { QueueGroups, ServiceNames, type Subjects } from "../../contracts/subjects.ts";
import { RequestMachine } from "../../actors/request/request-machine.ts";
import { buildReply, sloOutcome, type SloOutcome } from "../../actors/request/reply.ts";
import type { DifficultyScorer, HardnessThreshold } from "../../actors/routing/difficulty.ts";
import { throttled, type Logger } from "../telemetry/log.ts";
import { newInbox, onReconnect, sendKept, sendKeptWhenUp, watchConnection, whenUp, type NatsConnection, type ServiceMsg } from "../nats/connection.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import { openResultsBucket } from "../nats/kv-buckets.ts";
import { HandlingTally, replyError, replyWith, requestEncoding, startService } from "../nats/replies.ts";
import { PlanView } from "../nats/plan-view.ts";
import { within, type RunningService } from "../lifecycle/running.ts";
import { claimKeyFor, detached, IdempotencyCache } from "./idempotency.ts";
import { recoverLost, RECOVER_AFTER_MS, singleFlight } from "./recover.ts";
import { failGivenUp } from "./given-up.ts";
import { fingerprintOf, keyedRequestId, keyedSeed, keyReused } from "../../actors/request/idempotent.ts";
import { routerActors } from "./adapters.ts";
import { askedSettings } from "./settings.ts";
import { beginJob, type JobRun } from "./jobs.ts";
import { JobStream, type JobStreamOptions } from "../nats/job-stream.ts";
import { progressBetween, type Progress, type ProgressView } from "../../actors/request/progress.ts";
import type { ModelRanges } from "../../actors/routing/generation-options.ts";
import { NO_TIME_TO_JUDGE } from "../../actors/request/types.ts";
import { GenerationFloor } from "../../actors/routing/generation-floor.ts";
import { recordEscalationSkipped, recordJudgeFailure, recordLightFallback } from "../telemetry/metrics.ts";
import { refusal } from "../../actors/routing/admission.ts";
import { watchCapacity } from "./capacity-watch.ts";
import { moveTarget, PendingWork, type PendingItem } from "./pending.ts";
import { RequestTraces, type RequestSpan } from "./tracing.ts";
import { createMover } from "./mover.ts";
import { endWithError, messagingAttributes, REQUEST_SPAN, ServiceTelemetry, SpanKind } from "../telemetry/tracing.ts";

/** Router options. */
export interface RouterOptions {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  scorer: DifficultyScorer;
  threshold: HardnessThreshold;
  /** SLO used as the default deadline before a plan is known, ms. */
  defaultSloMs: number;
  log: Logger;
  routerId?: string;
  judgeTimeoutMs?: number;
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
}

/** Replies remembered by idempotency key take at most this much memory: 256 MiB. */
export const IDEMPOTENCY_BYTES = 256 * 1024 * 1024;

/** A running router. */
export interface RunningRouter extends RunningService {
  readonly routerId: string;
  readonly plans: PlanView;
  stats(): { received: number; replied: number; errors: number; inFlight: number; orphanedResults: number };
}

/** Starts a router instance. */
export async function startRouter(opts: RouterOptions): Promise<RunningRouter> {
  const { nc, subjects, log } = opts;
  const rangesOf = opts.rangesOf ?? ((name: string) => ({ name }));
  const routerId = opts.routerId ?? `r-${newInbox().slice(-10)}`;
  const resultsSubject = subjects.results(routerId);
  const { view: plans } = await PlanView.open(nc, subjects, log);
  const pending = new PendingWork((seq) => void opts.queue.remove(seq));
  /** Each model's fastest recent generation: a rejected light image is escalated only if the time left covers it. */
  const floor = new GenerationFloor();
  const heavyFloorMs = (model: string) => floor.floorMs(model);
  const results = await openResultsBucket(nc, subjects);
  const traces = new RequestTraces(new ServiceTelemetry(ServiceNames.router, nc, routerId, REQUEST_SPAN));
  /** Moves a waiting item off a model the plan no longer serves (removed by sequence, re-queued). */
  const move = createMover({ queue: opts.queue, pending, results, telemetry: traces.telemetry, log, afterEnqueue: (entry) => afterEnqueue(entry) });
  const rescue = (entry: PendingItem, to: string, plan: Plan) => void move(entry, to, plan);
  // Which workers are alive, from their heartbeats: work for a model none of them serves is
  // refused at once (`no_capacity`), not queued to wait out its deadline.
  const workers = watchCapacity(nc, subjects, log, opts.silentAfterMs ?? WORKER_SILENT_AFTER_MS);
  // A plan that leaves a model without workers must not strand the items queued for it: check on
  // every plan, and sweep once a second for items a worker handed back after the plan arrived.
  // Items of a model the plan gives no worker any more, and no other model can take over, are
  // answered now (`no_capacity`) rather than at their deadline.
  const sweep = (plan: Plan | null) => {
    if (plan) for (const { entry, to } of pending.stranded(plan)) rescue(entry, to, plan);
    const refusals = new Map<string, HadisError | null>();
    for (const entry of pending.waiting()) {
      const model = entry.item.model;
      if (entry.seq === 0 || (plan && moveTarget(plan, entry.stage, model))) continue;
      if (!refusals.has(model)) refusals.set(model, workers.planRefusal(model, plan));
      const refused = refusals.get(model);
      if (!refused) continue;
      pending.drop(entry);
      entry.reject(refused);
      // Its queued item too: a worker back before its deadline would make an image nobody waits for.
      if (entry.own !== false) void opts.queue.remove(entry.seq).catch(() => false);
    }
  };
  plans.onPlan(sweep);
  const sweepTimer = setInterval(() => sweep(plans.current), 1_000);
  sweepTimer.unref();
  // An item whose publish was acknowledged after such a plan arrived gets the same check.
  const afterEnqueue = (entry: PendingItem) => {
    const plan = plans.current;
    const to = plan ? moveTarget(plan, entry.stage, entry.item.model) : null;
    if (plan && to) rescue(entry, to, plan);
  };
  const resultsSub = nc.subscribe(resultsSubject, { callback: (_e, m) => pending.deliver(m.data) });
  // An item the server will not deliver again (its last delivery's worker crashed) fails its stage now, not at the deadline.
  const givenUpSub = nc.subscribe(subjects.workGivenUp, {
    callback: (err, m) => {
      // Refused (a role without the permission): the server closes the subscription, said once.
      if (err) log.error("router.given_up_unwatched", { error: err.message, fix: `allow this router's user to subscribe to ${subjects.workGivenUp}` });
      else failGivenUp({ queue: opts.queue, pending, workStream: subjects.names.workStream, log }, m.data);
    },
  });
  // Results sent while the connection was down are gone: once back, what they answered is found again.
  const recover = singleFlight(() =>
    recoverLost({ queue: opts.queue, pending, results, telemetry: traces.telemetry, log })
      .then((n) => n > 0 && log.warn("router.recovered_after_reconnect", { items: n }))
      .catch((err) => log.warn("router.recover_failed", { error: (err as Error).message })),
  );
  const stopReconnectWatch = onReconnect(nc, () => {
    // Heartbeats were missed meanwhile: no worker is taken for gone until they could have come again.
    workers.listenAgain();
    setTimeout(recover, RECOVER_AFTER_MS).unref();
  });
  const machine = RequestMachine.provide({
    actors: routerActors({
      nc,
      subjects,
      queue: opts.queue,
      pending,
      results,
      afterEnqueue,
      plans,
      scorer: opts.scorer,
      threshold: opts.threshold,
      resultsSubject,
      judgeTimeoutMs: opts.judgeTimeoutMs ?? 10_000,
      rangesOf,
      planWaitMs: 2_000,
      log,
      traces,
      floor,
      capacity: workers.refusal,
    }),
  });
  /** A judge outage fails every light request's verdict: one line a minute says so (the metric counts each). */
  const judgeFailed = throttled(log, "warn", "router.judge_failed");
  const keyUnchecked = throttled(log, "warn", "router.idempotency_key_unchecked");
  const idempotency = new IdempotencyCache<GenerateReply>(100_000, 10 * 60_000, Date.now, { maxBytes: opts.idempotencyBytes ?? IDEMPOTENCY_BYTES, sizeOf: (r) => r.image.buffer.byteLength + 1_024 });
  const counters = { received: 0, replied: 0, errors: 0, refused: 0, inFlight: 0, arrivalsSinceReport: 0 };
  /** Outcomes since the last load report (the dashboard's served and SLO series). */
  const outcomes = { served: 0, answered: 0, violations: 0 };
  const tally = (o: SloOutcome) => {
    outcomes.served += Number(o.served);
    outcomes.answered += Number(o.answered);
    outcomes.violations += Number(o.violated);
  };
  const errorsByCode: Record<string, number> = {};
  const inFlight = new Set<Promise<unknown>>();
  let accepting = true;
  /** Fails, at a stop whose grace runs out, each request still running: it gets a typed error reply, none is dropped. */
  const running = new Set<(err: HadisError) => void>();

  /** The request id a `serve` call gave its request (for the trace), once it has one. */
  interface Serving {
    requestId?: string;
    accepted: boolean;
    /** The deadline the caller gave, if any: one shorter than the SLO counts in no SLO figure. */
    deadlineMs?: number;
    /** Called once the request is checked, before it runs, with its deadline (a job answers its submitter here). */
    onChecked?: (deadlineMs: number) => Promise<void>;
    /** Hears the request's progress (a job publishes it). */
    onProgress?: (steps: Progress[]) => void;
  }

  async function serve(body: unknown, root: RequestSpan | null, serving: Serving): Promise<GenerateReply> {
    // The schema owns every rule of the request, the prompt's too (trimmed, not blank, not too long).
    const request = validate(GenerateRequestSchema, body, "generate request");
    const prompt = request.prompt;
    const { options, quality } = askedSettings(request, plans.current, rangesOf);
    await serving.onChecked?.(deadlineOf(request, plans.current?.sloMs ?? opts.defaultSloMs));
    const arrivedAtMs = Date.now();
    const key = request.idempotencyKey;
    /** What a keyed request asks: a retry repeats it; a key reused for another request differs. */
    const fingerprint = key ? fingerprintOf(prompt, request.seed, { ...options, quality }) : "";
    const requestId = key ? keyedRequestId(key, fingerprint) : newInbox().slice(-22);
    const run = async (): Promise<GenerateReply> => {
      // A keyed retry that waited on an attempt abandoned by this router's stop: it must not start
      // new work (its result could no longer reach a router that has stopped listening).
      if (!accepting) throw new HadisError("overloaded", "router is shutting down", { retryAfterMs: 100 });
      // Accepted: this request runs (or is refused for capacity, which counts). Demand and the SLO
      // figures count it; bad input refused at the edge, a key reused for another request, and a
      // retry answered from its first attempt do not (that attempt is counted).
      serving.accepted = true;
      counters.arrivalsSinceReport++;
      const seed = request.seed ?? (key ? keyedSeed(key) : randomInt(0, 0xffffffff));
      const deadlineMs = deadlineOf(request, plans.current?.sloMs ?? opts.defaultSloMs);
      // The caller's own (none: the SLO's, whatever the SLO is when the request ends).
      serving.deadlineMs = request.deadlineMs;
      const refused = refusal(plans.current, counters.inFlight, deadlineMs);
      if (refused) {
        counters.refused++;
        throw refused;
      }
      serving.requestId = requestId;
      traces.bind(requestId, root, { "hadis.deadline_ms": deadlineMs, "hadis.seed": seed });
      const asked = { ...(options ? { options } : {}), ...(quality ? { quality } : {}) };
      const actor = createActor(machine, { input: { requestId, prompt, seed, receivedAtMs: arrivedAtMs, deadlineAtMs: arrivedAtMs + deadlineMs, now: Date.now, heavyFloorMs, ...asked } });
      const outcome = toPromise(actor);
      if (serving.onProgress) {
        let before: ProgressView | undefined;
        actor.subscribe((snapshot) => {
          const steps = progressBetween(before, snapshot);
          before = snapshot;
          if (steps.length > 0) serving.onProgress!(steps);
        });
      }
      actor.start();
      // One abandon hook per request, dropped when it ends (a race against one shared promise
      // that never settles kept every reply, image included, for as long as the router ran).
      let abandon!: (err: HadisError) => void;
      const abandoned = new Promise<never>((_, reject) => (abandon = reject));
      running.add(abandon);
      try {
        const ended = await Promise.race([outcome, abandoned]);
        if (!ended.ok && ended.state === "expired") {
          // A missed SLO explained in one line: the stage it was in, the stages that ended (their times), the plan.
          const d = ended.decision;
          log.warn("router.expired", {
            requestId,
            deadlineMs,
            stage: ended.stage,
            hard: d?.hard,
            pair: d ? `${d.pair.light}→${d.pair.heavy}` : null,
            planEpoch: d?.planEpoch,
            timings: ended.timings,
            ...(ended.heavyError !== undefined ? { heavyError: ended.heavyError } : {}),
          });
        }
        if (ended.ok && ended.escalationSkipped) recordEscalationSkipped();
        // (A request with no time left to judge did not ask the judge: not a failure of it.)
        if (ended.ok && ended.judgeError !== undefined && ended.judgeError !== NO_TIME_TO_JUDGE) {
          recordJudgeFailure();
          judgeFailed({ requestId, error: ended.judgeError });
        }
        if (ended.ok && ended.heavyError !== undefined) {
          const sentBy = ended.judge ? "judge" : "router";
          recordLightFallback(sentBy);
          log.warn("router.light_fallback", { requestId, sentBy, plannedHeavy: ended.decision.pair.heavy, error: ended.heavyError, servedBy: ended.image.model });
        }
        return buildReply(ended, requestId, seed);
      } finally {
        running.delete(abandon);
        actor.stop(); // abandoned: its queued work is removed (a finished actor is already stopped)
      }
    };
    if (!key) return run();
    const deadlineMs = deadlineOf(request, plans.current?.sloMs ?? opts.defaultSloMs);
    // An attempt with this key may be running: its reply, waited for no longer than this retry's
    // own deadline. If it fails meanwhile (its own deadline, say), this retry tries again, unless
    // another retry already has (then that one is waited for): one run at a time per key.
    let matched = false;
    for (let previous = idempotency.get(key); previous; previous = idempotency.get(key)) {
      if (previous.fingerprint !== fingerprint) throw keyReused();
      matched = true;
      const leftMs = deadlineMs - (Date.now() - arrivedAtMs);
      if (!(await within(previous.value, leftMs))) {
        throw new HadisError("deadline_exceeded", `the first request with this idempotency key was still running at this one's ${deadlineMs} ms deadline`);
      }
      try {
        return { ...(await previous.value), deduplicated: true };
      } catch {
        // (The cache forgot the failed attempt before this line runs: the loop sees what came after.)
      }
    }
    // Remembered before anything is awaited: a second attempt arriving meanwhile waits on this one.
    // (One that matched an attempt here was claimed by it: the bucket would answer the same.)
    const reply = matched ? run() : claimKeyFor(results, key, fingerprint, (reason) => keyUnchecked({ requestId, reason })).then(run);
    idempotency.set(key, reply.then(detached), fingerprint);
    return reply;
  }

  /** Serves one request; with `jobs`, as a job (answered with its id once checked, its progress and result kept as events). Resolves the typed error it answered with, if any (for `$SRV.STATS`). */
  async function handle(msg: ServiceMsg, jobs?: JobStream): Promise<unknown> {
    counters.received++;
    let encoding: Encoding = "msgpack";
    const root = traces.receive(msg.subject, msg.headers, routerId);
    const serving: Serving = { accepted: false };
    const sloMs = () => plans.current?.sloMs ?? opts.defaultSloMs;
    let job: JobRun | null = null;
    if (jobs) {
      serving.onChecked = async (deadlineMs) => {
        job = await beginJob(msg, { stream: jobs, subjects, log }, encoding, Date.now() + deadlineMs);
        serving.onProgress = (steps) => job!.progress(steps);
      };
    }
    try {
      encoding = requestEncoding(msg);
      if (!accepting) throw new HadisError("overloaded", "router is shutting down", { retryAfterMs: 100 });
      const reply = await serve(parseRaw(msg.data, encoding), root, serving);
      if (job) return await finishJob(job as JobRun, reply, root, serving);
      // Held while the connection is down (back within 10 s): nats.js would drop it, and the caller
      // still waits. Sent again after a drop that comes just after it (lost with the socket, maybe).
      await whenUp(nc);
      const replySpan = serving.requestId ? traces.stage(serving.requestId, "reply", SpanKind.PRODUCER, { "hadis.encoding": encoding, ...messagingAttributes({ type: "send", name: "publish" }) }) : null;
      try {
        sendKept(nc, () => void replyWith(msg, reply, encoding));
      } catch (err) {
        if (replySpan) endWithError(replySpan, err);
        throw err;
      }
      replySpan?.end();
      counters.replied++;
      const slo = sloOutcome(reply, true, sloMs(), serving.deadlineMs);
      tally(slo);
      traces.finish(root, serving.requestId, reply, null, sloMs(), slo);
      return undefined;
    } catch (err) {
      counters.errors++;
      const code = asHadisError(err).code;
      errorsByCode[code] = (errorsByCode[code] ?? 0) + 1;
      try {
        // A job's submitter had its answer: its error is the job's last event.
        if (job) await (job as JobRun).failed(err);
        else await sendKeptWhenUp(nc, () => void replyError(msg, err, encoding));
      } finally {
        // Counted and its trace ended even when the reply cannot be sent (a closing connection).
        const slo = sloOutcome(null, serving.accepted, sloMs(), serving.deadlineMs);
        tally(slo);
        traces.finish(root, serving.requestId, null, err, sloMs(), slo);
      }
      return err;
    }
  }

  /** A job's result kept as its `done` event, counted as a reply is. */
  async function finishJob(job: JobRun, reply: GenerateReply, root: RequestSpan | null, serving: Serving): Promise<void> {
    await job.done(reply);
    counters.replied++;
    const sloMs = plans.current?.sloMs ?? opts.defaultSloMs;
    const slo = sloOutcome(reply, true, sloMs, serving.deadlineMs);
    tally(slo);
    traces.finish(root, serving.requestId, reply, null, sloMs, slo);
  }

  /** Each request's whole handling, for `$SRV.STATS`: errors and processing time as the caller sees them. */
  const handling = new HandlingTally();
  const service = await startService(nc, {
    name: ServiceNames.router,
    version: opts.version ?? "0.1.0",
    description: "HADIS router: routes each prompt (light, heavy, or light then heavy) under the plan in force",
    metadata: { routerId, protocol: String(PROTOCOL_VERSION) },
    statsHandler: async () => ({ ...counters, errorsByCode, orphanedResults: pending.orphaned, duplicateResults: pending.duplicates, malformedResults: pending.malformed }),
  }, { generate: handling });
  service.addEndpoint("generate", {
    subject: subjects.generate,
    queue: QueueGroups.router,
    handler: (_err, msg) => {
      counters.inFlight++;
      const done = handling.begin();
      // A reply that cannot be sent (the connection closing under a late request) is logged:
      // it must not become an unhandled rejection, which would end the process.
      const p = handle(msg).then(done, (err: unknown) => {
        done(err);
        log.warn("router.reply_failed", { error: (err as Error)?.message ?? String(err) });
      }).finally(() => {
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
        const p = handle(msg, jobs).catch((err: unknown) => log.warn("router.job_failed", { error: (err as Error)?.message ?? String(err) })).finally(() => {
          counters.inFlight--;
          inFlight.delete(p);
        });
        inFlight.add(p);
      },
    });
  }

  const statsEveryMs = opts.statsEveryMs ?? 1_000;
  let lastReportMs = Date.now();
  /** Publishes what happened since the last report sent (every `statsEveryMs`, and once more at stop). */
  const report = () => {
    // Not while the connection is down (nats.js would drop it, and its arrivals with it): the next
    // report covers the whole time since the last one sent.
    if (!watchConnection(nc).connected) return;
    const now = Date.now();
    const stats: RouterStats = {
      v: PROTOCOL_VERSION,
      routerId,
      arrivals: counters.arrivalsSinceReport,
      intervalMs: Math.max(1, now - lastReportMs),
      inFlight: counters.inFlight,
      ...outcomes,
      sentAtMs: now,
    };
    nc.publish(subjects.routerStats(routerId), encode(stats));
    counters.arrivalsSinceReport = 0;
    outcomes.served = outcomes.answered = outcomes.violations = 0;
    lastReportMs = now;
  };
  const statsTimer = setInterval(report, statsEveryMs);
  statsTimer.unref();

  log.info("router.started", { routerId, subject: subjects.generate });
  return {
    name: ServiceNames.router,
    routerId,
    plans,
    stats: () => ({ received: counters.received, replied: counters.replied, errors: counters.errors, inFlight: counters.inFlight, orphanedResults: pending.orphaned }),
    async stop(graceMs = 10_000) {
      accepting = false;
      clearInterval(statsTimer);
      clearInterval(sweepTimer);
      await service.stop().catch(() => undefined);
      const finished = await within(Promise.allSettled([...inFlight]), graceMs);
      if (!finished) {
        log.warn("router.stop_grace_exceeded", { inFlight: inFlight.size });
        const err = new HadisError("overloaded", `router stopped before this request finished (grace ${graceMs} ms): retry`, { retryAfterMs: 100 });
        for (const abandon of running) abandon(err);
        await within(Promise.allSettled([...inFlight]), 1_000);
      }
      // The last, partial interval: without it the requests of a router's last second go uncounted.
      if (!nc.isClosed()) report();
      resultsSub.unsubscribe();
      givenUpSub.unsubscribe();
      workers.stop();
      stopReconnectWatch();
      plans.close();
      await traces.telemetry.close();
      log.info("router.stopped", { routerId });
    },
  };
}
