/** A small client of `hadis.generate`: used by the CLI, the tests and the benchmarks. */
import { fromWireError, HadisError, isWireError, DependencyError } from "../../contracts/errors.ts";
import { decode, encode, encodeJson, parseRaw } from "../../contracts/envelope.ts";
import { GenerateReplyReadSchema, MAX_DEADLINE_MS, type GenerateReplyRead, type GenerateRequest } from "../../contracts/messages.ts";
import { ContentTypes, Headers, subjects as buildSubjects, type Subjects } from "../../contracts/subjects.ts";
import { JobAcceptedSchema, type JobAccepted, type JobEventRead } from "../../contracts/jobs.ts";
import {
  ASK_AGAIN_MS,
  headerOf,
  mayAskAgain,
  newHeaders,
  requestAttempt,
  watchConnection,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type RequestAttempt,
} from "../nats/connection.ts";
import { readJob, type FollowOptions } from "../nats/job-stream.ts";
import { requestReplies } from "../nats/request-replies.ts";

/** Reads a generate reply message: the reply, or the typed error it carries. */
export function readGenerateReply(msg: Msg): GenerateReplyRead {
  const isJson = headerOf(msg.headers, Headers.contentType).toLowerCase().startsWith(ContentTypes.json);
  if (headerOf(msg.headers, Headers.serviceErrorCode)) {
    const body = parseRaw(msg.data, isJson ? "json" : "msgpack");
    if (isWireError(body)) throw fromWireError(body);
    throw new HadisError("internal", headerOf(msg.headers, Headers.serviceError) || "error reply without body");
  }
  try {
    if (isJson) {
      const raw = parseRaw(msg.data, "json") as Record<string, unknown>;
      return decode(GenerateReplyReadSchema, encode({ ...raw, image: Buffer.from(String(raw.image), "base64") }), "generate reply");
    }
    return decode(GenerateReplyReadSchema, msg.data, "generate reply");
  } catch (err) {
    // A reply that cannot be read is the system's fault, not the caller's request's: not a 400.
    throw new HadisError("internal", `the router's reply could not be read: ${(err as Error).message}`, {}, { cause: err });
  }
}

/**
 * Whether a reply message ends its request's answer: any but a preview (`Hadis-Final: false`), so
 * an error reply, or a router that sends no such header, ends it too.
 */
export function isFinalMessage(msg: Pick<Msg, "headers">): boolean {
  return headerOf(msg.headers, Headers.final).trim().toLowerCase() !== "false";
}

/** Options of `HadisClient.generate`. */
export interface GenerateOptions {
  /** How long to wait for the (final) reply, ms (default `replyWaitMs`). */
  timeoutMs?: number;
  /** Send the request as JSON (default msgpack). */
  json?: boolean;
  /** Headers to send with it (a `traceparent`, say). */
  headers?: MsgHdrs;
  /**
   * With `preview: true` in the request: hears the preview (the light image the judge rejected,
   * `final: false`) while the heavy model makes the final image, which `generate` resolves with.
   */
  onPreview?: (preview: GenerateReplyRead) => void;
}

/**
 * How long a caller waits for the reply to `request`: its deadline and 5 s for the reply to
 * travel. Without one the router applies the SLO in force, which the caller does not know (60 s
 * times the time scale): the longest deadline any router accepts.
 */
export function replyWaitMs(request: Pick<GenerateRequest, "deadlineMs">): number {
  return (request.deadlineMs ?? MAX_DEADLINE_MS) + 5_000;
}

/**
 * Calls `hadis.generate`. Core NATS is at most once, and nats.js drops what is published while
 * the connection is down (its buffer is reset on each reconnect). So a request is sent only while
 * connected (waiting for the reconnect, within its time); "no responders" just after a reconnect
 * is asked again while the routers reconnect too (a restarted nats-server); a request with an
 * idempotency key whose connection drops while it waits is sent again once reconnected (a retry
 * never generates twice: it rides on the first attempt or reads its results). One without a key
 * is not: its timeout says the connection dropped.
 */
export class HadisClient {
  private readonly subject: string;
  private readonly subjects: Subjects;
  constructor(
    private readonly nc: NatsConnection,
    prefix?: string,
  ) {
    this.subjects = buildSubjects(prefix);
    this.subject = this.subjects.generate;
  }

  /**
   * Sends one request; resolves with the reply or rejects with a HadisError. `headers` (a
   * `traceparent`, say) go with it. A request with `preview: true` is read to its final reply,
   * `opts.onPreview` hearing the preview before it.
   */
  async generate(request: GenerateRequest, opts: GenerateOptions = {}): Promise<GenerateReplyRead> {
    const timeout = opts.timeoutMs ?? replyWaitMs(request);
    const end = Date.now() + timeout;
    const link = watchConnection(this.nc);
    const keyed = request.idempotencyKey !== undefined;
    let asked = request;
    let dropped = false;
    for (;;) {
      // Closed for good (not down for a while): nothing to wait for.
      if (this.nc.isClosed()) throw new HadisError("internal", "the NATS connection is closed");
      if (!link.connected && !(await link.untilConnected(end - Date.now()))) {
        throw new HadisError("no_capacity", `not connected to NATS: no reply within ${timeout} ms`, { retryAfterMs: 1_000 });
      }
      const attempt = await this.send(asked, opts.json ?? false, Math.max(1, end - Date.now()), keyed, opts.headers, opts.onPreview);
      if (attempt === "dropped") {
        // Sent again with the time the caller has left (a retry's deadline may be shorter: the key names the same work).
        dropped = true;
        if (request.deadlineMs !== undefined) {
          const margin = timeout - request.deadlineMs; // the wait past the deadline, for the reply to travel
          asked = { ...request, deadlineMs: Math.max(1, Math.min(request.deadlineMs, end - Date.now() - margin)) };
        }
        continue;
      }
      if ("msg" in attempt) return readGenerateReply(attempt.msg);
      dropped ||= attempt.dropped;
      const message = (attempt.err as Error)?.message ?? String(attempt.err);
      if (/no responders/i.test(message)) {
        // Routers still reconnecting (a restarted nats-server), or none serving.
        if (mayAskAgain(this.nc, attempt.err, end - Date.now())) {
          await new Promise((r) => setTimeout(r, ASK_AGAIN_MS));
          continue;
        }
        throw new HadisError("no_capacity", "no router is serving hadis.generate", { retryAfterMs: 1_000 }, { cause: attempt.err });
      }
      if (/timeout/i.test(message)) {
        const why = dropped
          ? "; the connection to NATS dropped meanwhile, so the request or its reply may be lost (with an idempotency key it is sent again after a reconnect)"
          : "";
        throw new HadisError("deadline_exceeded", `no reply within ${timeout} ms${why}`, {}, { cause: attempt.err });
      }
      throw new HadisError("internal", message, {}, { cause: attempt.err });
    }
  }

  /**
   * One request on the wire, to its final reply (a preview before it goes to `onPreview`); with
   * `resendOnDrop`, ends as "dropped" when the connection drops first.
   */
  private send(
    request: GenerateRequest,
    json: boolean,
    timeout: number,
    resendOnDrop: boolean,
    extra?: MsgHdrs,
    onPreview?: (preview: GenerateReplyRead) => void,
  ): Promise<RequestAttempt> {
    const headers = newHeaders();
    for (const [name, values] of extra ?? []) for (const value of values) headers.append(name, value);
    headers.set(Headers.contentType, json ? ContentTypes.json : ContentTypes.msgpack);
    const data = json ? encodeJson(request) : encode(request);
    if (!request.preview) return requestAttempt(this.nc, this.subject, data, { timeout, headers }, resendOnDrop);
    const reading = {
      isLast: isFinalMessage,
      onEarlier: (msg: Msg) => {
        // A preview that cannot be read is skipped: the final reply, which is waited for, says the rest.
        let preview: GenerateReplyRead;
        try {
          preview = readGenerateReply(msg);
        } catch {
          return;
        }
        onPreview?.(preview);
      },
    };
    return requestReplies(this.nc, this.subject, data, { timeout, headers }, reading, resendOnDrop);
  }

  /**
   * Submits a generate request as an asynchronous job: resolves at once with its id (a checked
   * request; a refused one rejects with its HadisError, as `generate` does). Follow it with `job`.
   */
  async submitJob(request: GenerateRequest, opts: { timeoutMs?: number; headers?: MsgHdrs } = {}): Promise<JobAccepted> {
    const headers = opts.headers ?? newHeaders();
    headers.set(Headers.contentType, ContentTypes.msgpack);
    const attempt = await requestAttempt(
      this.nc,
      this.subjects.jobsSubmit,
      encode(request),
      { timeout: opts.timeoutMs ?? 10_000, headers },
      false,
    );
    if (attempt === "dropped")
      throw new HadisError("no_capacity", "the connection to NATS dropped before the job was accepted", { retryAfterMs: 1_000 });
    if ("err" in attempt) {
      const message = (attempt.err as Error)?.message ?? String(attempt.err);
      if (/no responders/i.test(message))
        throw new HadisError("no_capacity", "no router is taking jobs", { retryAfterMs: 1_000 }, { cause: attempt.err });
      throw new HadisError(/timeout/i.test(message) ? "deadline_exceeded" : "internal", message, {}, { cause: attempt.err });
    }
    if (attempt.msg.headers?.get(Headers.serviceErrorCode)) {
      const body = parseRaw(attempt.msg.data);
      throw isWireError(body) ? fromWireError(body) : new HadisError("internal", attempt.msg.headers.get(Headers.serviceError));
    }
    return decode(JobAcceptedSchema, attempt.msg.data, "job accepted");
  }

  /**
   * A job's events, oldest first, from the jobs stream: with `follow` (the default) until its
   * `done` or `failed` event, else what is kept now. Works from any connection, at any time
   * within the hour the stream keeps jobs: a caller that reconnects reads its job again.
   */
  job(jobId: string, opts: Partial<FollowOptions> = {}): AsyncGenerator<JobEventRead> {
    return readJob(this.nc, this.subjects, jobId, { follow: true, ...opts });
  }

  /**
   * Resolves once the system answers a request (a start, a restart, a fail-over), retrying
   * every 200 ms; rejects with the last error after `timeoutMs`.
   */
  async waitUntilServing(timeoutMs = 30_000, attemptMs = 6_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.generate({ prompt: "warm up", deadlineMs: 5_000 }, { timeoutMs: attemptMs });
        return;
      } catch (err) {
        // An answer that waiting cannot change (a refused request, a misconfigured system) is
        // thrown as it came; so is the last error when time runs out, with its code.
        if (err instanceof HadisError && !err.retryable) throw err;
        if (Date.now() > end) {
          if (err instanceof HadisError)
            throw new HadisError(err.code, `not serving after ${timeoutMs} ms: ${err.message}`, err.details, { cause: err });
          throw new DependencyError(`no reply within ${timeoutMs} ms: ${(err as Error).message}`, { cause: err });
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }
}
