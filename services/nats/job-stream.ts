/**
 * The jobs stream: every event of every asynchronous job (`hadis.jobs.<id>.<kind>`), kept for an
 * hour so a caller that reconnects reads its job's progress and result again. Routers write it;
 * readers (the HTTP gateway, `HadisClient`) follow one job with an ordered consumer.
 */
import { headers as natsHeaders } from "@nats-io/nats-core";
import { DeliverPolicy, jetstream, jetstreamManager, StorageType, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { Subjects } from "../../contracts/subjects.ts";
import { ContentTypes, Headers } from "../../contracts/subjects.ts";
import { encodeAs, parseRaw, type Encoding } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import { isTerminal, JOB_LOST_AFTER_MS, readJobEvent, type JobEvent, type JobEventRead } from "../../contracts/jobs.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import type { NatsConnection } from "./connection.ts";

/** How the jobs stream is kept. */
export interface JobStreamOptions {
  storage: "file" | "memory";
  replicas: number;
  /** How long a job's events are kept, ms. */
  maxAgeMs: number;
  /** Most bytes the stream holds (each replica); full, the oldest jobs go first. */
  maxBytes: number;
}

/** Defaults: an hour of jobs, at most 4 GiB (about 2,700 results of 1.5 MB). */
export const DEFAULT_JOB_STREAM: JobStreamOptions = { storage: "file", replicas: 1, maxAgeMs: 60 * 60_000, maxBytes: 4 * 1024 ** 3 };

const ms2ns = (ms: number) => Math.round(ms * 1_000_000);
const contentTypeOf = (encoding: Encoding) => (encoding === "json" ? ContentTypes.json : ContentTypes.msgpack);

/** The writer's side of the jobs stream. */
export class JobStream {
  private constructor(
    private readonly js: JetStreamClient,
    private readonly subjects: Subjects,
  ) {}

  /** Opens (creating if needed) the jobs stream. */
  static async open(nc: NatsConnection, subjects: Subjects, options: Partial<JobStreamOptions> = {}): Promise<JobStream> {
    const o = { ...DEFAULT_JOB_STREAM, ...options };
    const jsm = await jetstreamManager(nc);
    const name = subjects.names.jobStream;
    try {
      await jsm.streams.info(name);
    } catch {
      try {
        await jsm.streams.add({
          name,
          subjects: [subjects.jobEventsAll],
          storage: o.storage === "memory" ? StorageType.Memory : StorageType.File,
          num_replicas: o.replicas,
          max_age: ms2ns(o.maxAgeMs),
          max_bytes: o.maxBytes,
          // The same event published twice (a retry after a lost acknowledgement) is kept once.
          duplicate_window: ms2ns(2 * 60_000),
        } as never);
      } catch (err) {
        if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
      }
    }
    return new JobStream(jetstream(nc), subjects);
  }

  /** Appends one event (in the submitter's encoding), resolving once the stream has it. */
  async publish(event: JobEvent, encoding: Encoding): Promise<void> {
    const h = natsHeaders();
    h.set(Headers.contentType, contentTypeOf(encoding));
    await this.js.publish(this.subjects.jobEvent(event.jobId, event.kind), encodeAs(event, encoding), {
      msgID: `${event.jobId}/${event.seq}`,
      headers: h,
    });
  }
}

/** Options of `followJob`. */
export interface FollowOptions {
  /** Keep reading until the job ends (`done` or `failed`); false: what is kept now, then stop. */
  follow: boolean;
  /** Skip events up to this sequence (a reader resuming, as SSE's `Last-Event-ID`). */
  afterSeq?: number;
  signal?: AbortSignal;
  /** Clock, for telling a job whose router stopped mid-way (default `Date.now`). */
  now?: () => number;
}

/**
 * The events of one job, oldest first, read from the jobs stream (an ordered consumer: no state
 * left on the server). Refuses an unknown job (`unknown_job`). While following, a job with no
 * terminal event `JOB_LOST_AFTER_MS` past its deadline ends with a `failed` event made here
 * (`deadline_exceeded`: its router stopped before it ended; that event is not kept in the stream).
 */
export async function* readJob(nc: NatsConnection, subjects: Subjects, jobId: string, opts: FollowOptions): AsyncGenerator<JobEventRead> {
  const now = opts.now ?? Date.now;
  const stream = subjects.names.jobStream;
  const jsm = await jetstreamManager(nc);
  const queued = await firstEvent(jsm, stream, subjects.jobEvent(jobId, "queued"));
  if (!queued) throw new HadisError("unknown_job", `no job ${jobId} (unknown, or older than the jobs stream keeps)`, { field: "jobId" });
  const deadlineAtMs = queued.kind === "queued" ? queued.deadlineAtMs : Infinity;
  const consumer = await jetstream(nc).consumers.get(stream, {
    filter_subjects: subjects.jobEvents(jobId),
    deliver_policy: DeliverPolicy.All,
  });
  let lastSeq = 0;
  let ended = false;
  const lostAtMs = deadlineAtMs + JOB_LOST_AFTER_MS;
  // Not following, or following a job already past its time (nothing more will come: its router
  // stopped): what is kept now, read whole (the consumer says how many remain after each message).
  if (!opts.follow || now() >= lostAtMs) {
    const batch = await consumer.fetch({ max_messages: 1_000, expires: 2_000 });
    for await (const m of batch) {
      const event = decodeEvent(m.data, m.headers?.get(Headers.contentType));
      if (event) {
        lastSeq = Math.max(lastSeq, event.seq);
        ended ||= isTerminal(event.kind);
        if (event.seq > (opts.afterSeq ?? 0)) yield event;
      }
      if (m.info.pending === 0) break;
    }
    await consumer.delete().catch(() => undefined);
    if (!opts.follow) return;
  } else {
    const messages = await consumer.consume({ max_messages: 100 });
    const timer = setTimeout(() => messages.stop(), Math.max(0, Math.min(lostAtMs - now(), 2 ** 31 - 1)));
    const stop = () => messages.stop();
    opts.signal?.addEventListener("abort", stop, { once: true });
    try {
      for await (const m of messages) {
        const event = decodeEvent(m.data, m.headers?.get(Headers.contentType));
        if (!event) continue;
        lastSeq = Math.max(lastSeq, event.seq);
        if (event.seq > (opts.afterSeq ?? 0)) yield event;
        if (isTerminal(event.kind)) {
          ended = true;
          break;
        }
      }
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", stop);
      messages.stop();
    }
  }
  if (!ended && !opts.signal?.aborted && now() >= lostAtMs) {
    const error = new HadisError(
      "deadline_exceeded",
      `job ${jobId} had not ended ${JOB_LOST_AFTER_MS} ms past its deadline: the router running it stopped before it could; submit it again`,
    );
    yield {
      v: PROTOCOL_VERSION,
      jobId,
      seq: lastSeq + 1,
      atMs: now(),
      kind: "failed",
      error: { code: error.code, status: error.status, message: error.message, retryable: true },
    };
  }
}

/** The first event kept on `subject`, or null when none is. */
async function firstEvent(jsm: JetStreamManager, stream: string, subject: string): Promise<JobEventRead | null> {
  try {
    const m = await jsm.streams.getMessage(stream, { last_by_subj: subject });
    return m ? decodeEvent(m.data, m.header?.get(Headers.contentType)) : null;
  } catch (err) {
    if (/no message found|not found|404|10037/i.test(String((err as Error).message))) return null;
    throw err;
  }
}

/** A kept event, in the encoding its header names; null for a kind this code does not know. */
function decodeEvent(data: Uint8Array, contentType: string | undefined): JobEventRead | null {
  const json = (contentType ?? "").startsWith(ContentTypes.json);
  const raw = parseRaw(data, json ? "json" : "msgpack") as Record<string, unknown>;
  // A JSON `done` or `preview` event carries its image base64-encoded.
  if (
    json &&
    (raw.kind === "done" || raw.kind === "preview") &&
    raw.result &&
    typeof (raw.result as { image?: unknown }).image === "string"
  ) {
    raw.result = { ...(raw.result as object), image: new Uint8Array(Buffer.from((raw.result as { image: string }).image, "base64")) };
  }
  return readJobEvent(raw);
}
