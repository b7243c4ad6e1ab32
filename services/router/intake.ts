/**
 * The router's intake: a `hadis.generate` request (or a job submission) from its message to its
 * reply. The request is read in its encoding and checked by its schema, its settings against the
 * plan; a keyed retry is answered from its first attempt; demand counts it and admission may
 * refuse it; then its stages run it, and the reply (or the typed error) goes back, held through a
 * dropped connection, counted and traced.
 */
import { randomInt } from "node:crypto";
import { HadisError } from "../../contracts/errors.ts";
import { parseRaw, validate, type Encoding } from "../../contracts/envelope.ts";
import { deadlineOf, GenerateRequestSchema, type GenerateReply } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import { fingerprintOf, keyedRequestId, keyedSeed, keyReused } from "../../actors/request/idempotent.ts";
import type { RequestClock } from "../../actors/request/request-machine.ts";
import type { Progress } from "../../actors/request/progress.ts";
import { finalReply, sloOutcome } from "../../actors/request/reply.ts";
import { refusal } from "../../actors/routing/admission.ts";
import { planMechanisms } from "../../actors/artifact/mechanisms.ts";
import { ARTIFACT_SLO_FACTOR } from "../../actors/artifact/worker-rules.ts";
import type { ModelRanges } from "../../actors/routing/generation-options.ts";
import { throttled, type Logger } from "../telemetry/log.ts";
import { endWithError, messagingAttributes, SpanKind } from "../telemetry/tracing.ts";
import { newInbox, sendKept, sendKeptWhenUp, whenUp, type KV, type NatsConnection, type ServiceMsg } from "../nats/connection.ts";
import type { JobStream } from "../nats/job-stream.ts";
import type { PlanView } from "../nats/plan-view.ts";
import { replyError, replyWith, requestEncoding } from "../nats/replies.ts";
import { within } from "../lifecycle/running.ts";
import { claimKeyFor, detached, type IdempotencyCache } from "./idempotency.ts";
import { beginJob, type JobRun } from "./jobs.ts";
import { askedSettings } from "./settings.ts";
import type { RequestStages } from "./stages.ts";
import type { RouterTally } from "./stats.ts";
import type { RequestSpan, RequestTraces } from "./tracing.ts";

/** What the intake needs. */
export interface IntakeOptions {
  nc: NatsConnection;
  subjects: Subjects;
  plans: PlanView;
  stages: RequestStages;
  tally: RouterTally;
  traces: RequestTraces;
  /** Replies remembered by idempotency key (a retry through this router gets the first one). */
  idempotency: IdempotencyCache<GenerateReply>;
  /** Results of keyed requests (a key's claim is recorded there). */
  results: KV;
  /** SLO used as the default deadline before a plan is known, ms. */
  defaultSloMs: number;
  rangesOf: (model: string) => ModelRanges;
  routerId: string;
  clock: RequestClock;
  log: Logger;
}

/** The router's intake. */
export interface RouterIntake {
  /** Serves one request; with `jobs`, as a job. Resolves the typed error it answered with, if any (for `$SRV.STATS`). */
  handle(msg: ServiceMsg, jobs?: JobStream): Promise<unknown>;
  /** Takes no new request from now on (a stop): each is answered `overloaded`. */
  close(): void;
}

/** How one request is being served, as far as the intake knows. */
interface Serving {
  /** The request id it was given (for the trace), once it has one. */
  requestId?: string;
  accepted: boolean;
  /** The deadline the caller gave, if any: one shorter than the SLO counts in no SLO figure. */
  deadlineMs?: number;
  /** Called once the request is checked, before it runs, with its deadline (a job answers its submitter here). */
  onChecked?: (deadlineMs: number) => Promise<void>;
  /** Hears the request's progress (a job publishes it). */
  onProgress?: (steps: Progress[]) => void;
  /** The request asked for a preview: its caller reads messages until the one marked final. */
  preview?: boolean;
  /** Sends the preview (the light image the judge rejected) while the heavy model makes the final image. */
  onPreview?: (preview: GenerateReply) => void;
}

/** The router's intake over its stages. */
export function createIntake(o: IntakeOptions): RouterIntake {
  const { nc, plans, tally, traces, log, clock } = o;
  const counters = tally.counters;
  const keyUnchecked = throttled(log, "warn", "router.idempotency_key_unchecked");
  const previewLost = throttled(log, "warn", "router.preview_lost");
  const sloMs = () => plans.current?.sloMs ?? o.defaultSloMs;
  let accepting = true;
  const shuttingDown = () => new HadisError("overloaded", "router is shutting down", { retryAfterMs: 100 });

  /** Checks a request and runs it (or answers a keyed retry from its first attempt). */
  async function serve(body: unknown, root: RequestSpan | null, serving: Serving): Promise<GenerateReply> {
    // The schema owns every rule of the request, the prompt's too (trimmed, not blank, not too long).
    const request = validate(GenerateRequestSchema, body, "generate request");
    serving.preview = request.preview === true;
    const prompt = request.prompt;
    const { options, quality } = askedSettings(request, plans.current, o.rangesOf);
    await serving.onChecked?.(deadlineOf(request, sloMs()));
    const arrivedAtMs = clock.now();
    const key = request.idempotencyKey;
    /** What a keyed request asks: a retry repeats it; a key reused for another request differs. */
    const fingerprint = key ? fingerprintOf(prompt, request.seed, { ...options, quality }) : "";
    const requestId = key ? keyedRequestId(key, fingerprint) : newInbox().slice(-22);
    const run = async (): Promise<GenerateReply> => {
      // A keyed retry that waited on an attempt abandoned by this router's stop: it must not start
      // new work (its result could no longer reach a router that has stopped listening).
      if (!accepting) throw shuttingDown();
      // Accepted: this request runs (or is refused for capacity, which counts). Demand and the SLO
      // figures count it; bad input refused at the edge, a key reused for another request, and a
      // retry answered from its first attempt do not (that attempt is counted).
      serving.accepted = true;
      counters.arrivalsSinceReport++;
      const seed = request.seed ?? (key ? keyedSeed(key) : randomInt(0, 0xffffffff));
      const deadlineMs = deadlineOf(request, sloMs());
      // The caller's own (none: the SLO's, whatever the SLO is when the request ends).
      serving.deadlineMs = request.deadlineMs;
      // Under the artifact's drops nothing is refused at the door, nothing served early as the deadline
      // nears, and work carries 1.5 × SLO from the start (its workers drop what cannot finish by then).
      const artifactDrops = planMechanisms(plans.current).has("drops");
      const refused = artifactDrops ? null : refusal(plans.current, counters.inFlight, deadlineMs);
      if (refused) {
        counters.refused++;
        throw refused;
      }
      serving.requestId = requestId;
      traces.bind(requestId, root, { "hadis.deadline_ms": deadlineMs, "hadis.seed": seed });
      const drops = artifactDrops
        ? {
            artifactDrops: {
              workDeadlineAtMs: Math.min(arrivedAtMs + deadlineMs, arrivedAtMs + ARTIFACT_SLO_FACTOR * sloMs()),
              sloDeadlineAtMs: arrivedAtMs + sloMs(),
            },
          }
        : {};
      return o.stages.run(
        {
          requestId,
          prompt,
          seed,
          receivedAtMs: arrivedAtMs,
          deadlineMs,
          ...(options ? { options } : {}),
          ...(quality ? { quality } : {}),
          ...(request.preview ? { preview: true } : {}),
          ...drops,
        },
        {
          ...(serving.onProgress ? { onProgress: serving.onProgress } : {}),
          ...(serving.onPreview ? { onPreview: serving.onPreview } : {}),
        },
      );
    };
    if (!key) return run();
    const deadlineMs = deadlineOf(request, sloMs());
    // An attempt with this key may be running: its reply, waited for no longer than this retry's
    // own deadline. If it fails meanwhile (its own deadline, say), this retry tries again, unless
    // another retry already has (then that one is waited for): one run at a time per key.
    let matched = false;
    for (let previous = o.idempotency.get(key); previous; previous = o.idempotency.get(key)) {
      if (previous.fingerprint !== fingerprint) throw keyReused();
      matched = true;
      const leftMs = deadlineMs - (clock.now() - arrivedAtMs);
      if (!(await within(previous.value, leftMs))) {
        throw new HadisError(
          "deadline_exceeded",
          `the first request with this idempotency key was still running at this one's ${deadlineMs} ms deadline`,
        );
      }
      try {
        return { ...(await previous.value), deduplicated: true };
      } catch {
        // (The cache forgot the failed attempt before this line runs: the loop sees what came after.)
      }
    }
    // Remembered before anything is awaited: a second attempt arriving meanwhile waits on this one.
    // (One that matched an attempt here was claimed by it: the bucket would answer the same.)
    const reply = matched ? run() : claimKeyFor(o.results, key, fingerprint, (reason) => keyUnchecked({ requestId, reason })).then(run);
    o.idempotency.set(key, reply.then(detached), fingerprint);
    return reply;
  }

  /** Counts a request's SLO outcome and ends its trace. */
  function finish(root: RequestSpan | null, serving: Serving, reply: GenerateReply | null, err: unknown): void {
    const slo = sloOutcome(reply, reply !== null || serving.accepted, sloMs(), serving.deadlineMs);
    tally.slo(slo);
    traces.finish(root, serving.requestId, reply, err, sloMs(), slo);
  }

  /** A job's result kept as its `done` event, counted as a reply is. */
  async function finishJob(job: JobRun, reply: GenerateReply, root: RequestSpan | null, serving: Serving): Promise<void> {
    await job.done(reply);
    counters.replied++;
    finish(root, serving, reply, null);
  }

  async function handle(msg: ServiceMsg, jobs?: JobStream): Promise<unknown> {
    counters.received++;
    let encoding: Encoding = "msgpack";
    const root = traces.receive(msg.subject, msg.headers, o.routerId);
    const serving: Serving = { accepted: false };
    let job: JobRun | null = null;
    if (jobs) {
      serving.onChecked = async (deadlineMs) => {
        job = await beginJob(msg, { stream: jobs, subjects: o.subjects, log }, encoding, Date.now() + deadlineMs);
        serving.onProgress = (steps) => job!.progress(steps);
        serving.onPreview = (preview) => job!.preview(preview);
      };
    } else {
      // A preview is a reply of its own to the caller's inbox, held through a drop as the final
      // one is; one that cannot be sent is not the request's failure (the final reply follows).
      serving.onPreview = (preview) =>
        void sendKeptWhenUp(nc, () => void replyWith(msg, preview, encoding, false)).catch((err: unknown) =>
          previewLost({ requestId: preview.requestId, error: (err as Error).message }),
        );
    }
    try {
      encoding = requestEncoding(msg);
      if (!accepting) throw shuttingDown();
      const reply = await serve(parseRaw(msg.data, encoding), root, serving);
      // Marked final for a caller that asked for a preview (the idempotency cache keeps it unmarked).
      const sent = finalReply(reply, serving.preview === true);
      if (job) return await finishJob(job as JobRun, sent, root, serving);
      // Held while the connection is down (back within 10 s): nats.js would drop it, and the caller
      // still waits. Sent again after a drop that comes just after it (lost with the socket, maybe).
      await whenUp(nc);
      const replySpan = serving.requestId
        ? traces.stage(serving.requestId, "reply", SpanKind.PRODUCER, {
            "hadis.encoding": encoding,
            ...messagingAttributes({ type: "send", name: "publish" }),
          })
        : null;
      try {
        sendKept(nc, () => void replyWith(msg, sent, encoding, serving.preview ? true : undefined));
      } catch (err) {
        if (replySpan) endWithError(replySpan, err);
        throw err;
      }
      replySpan?.end();
      counters.replied++;
      finish(root, serving, reply, null);
      return undefined;
    } catch (err) {
      tally.error(err);
      try {
        // A job's submitter had its answer: its error is the job's last event.
        if (job) await (job as JobRun).failed(err);
        else await sendKeptWhenUp(nc, () => void replyError(msg, err, encoding, serving.preview ? true : undefined));
      } finally {
        // Counted and its trace ended even when the reply cannot be sent (a closing connection).
        finish(root, serving, null, err);
      }
      return err;
    }
  }

  return {
    handle,
    close: () => void (accepting = false),
  };
}
