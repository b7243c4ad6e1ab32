/**
 * The one module that talks to the NATS client libraries: connections, the JetStream work
 * queue (stream, per-model pull consumers, batched pulls), the plan KV bucket, micro services
 * and the reply helpers that put typed errors in the service error headers.
 */
import { createLogger } from "./log.ts";
import { retryWhile } from "./running.ts";
import { connect, type NodeConnectionOptions } from "@nats-io/transport-node";
import { MsgHdrsImpl } from "@nats-io/nats-core/internal";
import { createInbox, headers as natsHeaders, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from "@nats-io/nats-core";
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Svcm, type Service, type ServiceConfig, type ServiceMsg } from "@nats-io/services";
import { ContentTypes, Headers, type Subjects } from "../../contracts/subjects.ts";
import { asHadisError, HadisError, toWireError } from "../../contracts/errors.ts";
import { encodeAs, MAX_PAYLOAD_BYTES, type Encoding } from "../../contracts/envelope.ts";
import { MAX_DEADLINE_MS, PROTOCOL_VERSION } from "../../contracts/messages.ts";
import type { Delivery } from "../../actors/worker/worker-agent.ts";

export type { Msg, MsgHdrs, NatsConnection, Service, ServiceMsg, Subscription, KV, JetStreamClient };

/** Default NATS URL everywhere (where `npm start` listens). */
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

/** Connects with endless reconnects (services outlive server restarts and fail-overs). */
export async function connectNats(servers: string | string[], name: string, extra: Partial<NodeConnectionOptions> = {}): Promise<NatsConnection> {
  return connect({
    servers,
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    pingInterval: 5_000,
    // The library otherwise builds an Error per request and per timeout, for async stack traces:
    // about 8% of the pipeline's CPU time at zero model latency. Our errors carry their context.
    noAsyncTraces: true,
    ...extra,
  });
}

/**
 * Socket errors of a server not up yet: nothing listens, its name does not resolve yet, its host
 * is not reachable yet, or a proxy in front of it (Docker's, a service mesh's) accepts and drops
 * the connection while nothing listens behind it.
 */
const NOT_UP_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "ECONNRESET", "EPIPE"]);

/**
 * True for a first connection's failure that a NATS server still starting gives (connection
 * refused, a name that does not resolve yet, no answer in time), not one of configuration
 * (credentials refused, TLS, a bad URL), which waiting does not mend.
 */
export function isServerNotUp(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: string; cause?: { code?: string } } | undefined;
  if (!e) return false;
  if (e.name === "TimeoutError") return true;
  // (nats.js's own words for a refused connection, and for a socket closed with no error given.)
  if (e.name === "ConnectionError" && /connection refused|undefined error/i.test(e.message ?? "")) return true;
  return NOT_UP_CODES.has(e.code ?? "") || NOT_UP_CODES.has(e.cause?.code ?? "");
}

/**
 * True for a JetStream call's failure while a cluster still forms: no leader yet ("temporarily
 * unavailable", 503), peers not all known yet for a replicated stream ("insufficient resources"),
 * or no answer. Follows `cause`s (a service start wraps what failed).
 */
export function isJetStreamNotReady(err: unknown): boolean {
  for (let e = err as { name?: string; message?: string; code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (e.name === "TimeoutError" || e.code === 503 || e.code === "503") return true;
    if (/temporarily unavailable|insufficient resources|no suitable peers|jetstream not (enabled|ready)/i.test(e.message ?? "")) return true;
  }
  return false;
}

/** How often a service waiting for its NATS server tries again. */
export const NATS_WAIT_RETRY_MS = 1_000;

/**
 * `connectNats`, trying again every `NATS_WAIT_RETRY_MS` for up to `waitMs` while the server is not
 * up yet (`isServerNotUp`): services started before their server (one container before another)
 * wait for it instead of exiting. While waiting, a try waits for an answer no longer than the
 * time left (nats.js waits 20 s by default). `waiting` hears of the first failure; any other
 * failure, or the last, is thrown.
 */
export function connectWhenUp(servers: string | string[], name: string, extra: Partial<NodeConnectionOptions>, waitMs: number, waiting: (err: unknown) => void = () => {}): Promise<NatsConnection> {
  const connectWithin = (leftMs: number) => connectNats(servers, name, waitMs > 0 ? { ...extra, timeout: Math.max(1_000, Math.min(extra.timeout ?? 20_000, leftMs)) } : extra);
  return retryWhile(connectWithin, isServerNotUp, waitMs, NATS_WAIT_RETRY_MS, waiting);
}

/** TLS files of a NATS connection: a CA to trust, and a client certificate and key for mutual TLS. */
export interface NatsTlsFiles {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** A new NATS header set. */
export const newHeaders = natsHeaders;

/**
 * A header set of values this process built (names of `Headers`; values without CR or LF, such
 * as `traceparentOf` writes and a parsed `TraceState` serializes): without the library's
 * per-header checks, which cost more than the message's other work. Never for values a caller
 * sent as they came. (`MsgHdrsImpl` is nats.js's internal class: check it on an upgrade.)
 */
export function trustedHeaders(values: Record<string, string[]>): MsgHdrs {
  return MsgHdrsImpl.fromRecord(values);
}
/** A unique inbox subject. */
export const newInbox = createInbox;

/** Calls `fn` after each reconnect of `nc` until the returned function is called (a service's stop: the connection may outlive it). */
export function onReconnect(nc: NatsConnection, fn: () => void): () => void {
  return watchConnection(nc).onEveryReconnect(fn);
}

/** A connection's ups and downs, as a caller waiting on replies needs them. */
export interface ConnectionWatch {
  /** True while the connection is up: what is published now goes out (nats.js drops what is published while it is down). */
  readonly connected: boolean;
  /** When the connection last came back (epoch ms); 0 when it never dropped. */
  readonly reconnectedAtMs: number;
  /** Resolves true once connected (at once when it is), false after `ms` or when the connection closes. */
  untilConnected(ms: number): Promise<boolean>;
  /** Calls `fn` when the connection next drops; the returned function forgets it. */
  onNextDrop(fn: () => void): () => void;
  /** Calls `fn` after each reconnect (after what waited for it); the returned function forgets it. */
  onEveryReconnect(fn: () => void): () => void;
  /**
   * Runs `send` now when the connection is up; else once it is back, before anything else waiting
   * on the reconnect and in the order asked, or `gaveUp` after `withinMs`, on a close, or when
   * `send` throws then. Once sent it is remembered (`remember`).
   */
  sendWhenUp(send: () => void, withinMs: number, gaveUp: () => void): void;
  /** Remembers a send just made: a drop within `REPLAY_MS` runs it again once reconnected. */
  remember(send: () => void): void;
  /** Sends remembered now (each holds what it sends, an image say, until `REPLAY_MS` has passed). */
  readonly remembered: number;
}

/** A send waiting for the reconnect. */
interface Deferred {
  send: () => void;
  gaveUp: () => void;
  timer: ReturnType<typeof setTimeout>;
  /** Kept for `REPLAY_MS` once sent (a send), or not (a waiter of `untilConnected`). */
  keep: boolean;
}

/**
 * How long a send that must not be lost is kept after it went out: what a connection writes
 * just before it drops is lost with the socket (nats.js sees the drop only once it reads the
 * socket's end, a moment later on a busy process), so a drop sends again, once reconnected, what
 * was sent this long before it. Those who receive twice ignore the second: a requester has
 * stopped listening, JetStream takes a second acknowledgement as none, a router drops a second
 * result. A connection that dies without a word (no reset) is seen only by missed pings, seconds
 * later: that loss stays core NATS's at most once.
 */
export const REPLAY_MS = 500;

class StatusWatch implements ConnectionWatch {
  reconnectedAtMs = 0;
  private readonly drops = new Set<() => void>();
  private readonly reconnects = new Set<() => void>();
  /** What waits for the reconnect (sends, and `untilConnected`'s callers), in the order asked. */
  private deferred = new Set<Deferred>();
  /** Sends made in the last `REPLAY_MS` (`performance.now()`), oldest first. */
  private recent: { atMs: number; send: () => void }[] = [];
  /** Lets go of sends older than `REPLAY_MS` while no new one comes (an idle process kept its last ones, images and all). */
  private trimTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly nc: NatsConnection) {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") {
          this.replayRecent();
          const now = [...this.drops];
          this.drops.clear();
          for (const fn of now) fn();
        } else if (s.type === "reconnect") {
          this.reconnectedAtMs = Date.now();
          // In the order asked; a send runs here and now, a waiter's continuation after all of
          // them: a worker's acknowledgement goes before its sibling's next pull.
          this.flush((d) => d.send(), true);
          for (const fn of [...this.reconnects]) fn();
        }
      }
      // Closed: nobody waits for a reconnect any more.
      this.flush((d) => d.gaveUp(), false);
    })().catch(() => undefined);
  }

  /** Runs `run` on what waits, in order; `sending`: they were sent (remembered, those kept). */
  private flush(run: (d: Deferred) => void, sending: boolean): void {
    const now = [...this.deferred];
    this.deferred.clear();
    for (const d of now) {
      clearTimeout(d.timer);
      try {
        run(d);
        if (sending && d.keep) this.remember(d.send);
      } catch {
        d.gaveUp();
      }
    }
  }

  /** Remembers a send just made, for `REPLAY_MS`. */
  remember(send: () => void): void {
    const now = performance.now();
    this.trim(now);
    this.recent.push({ atMs: now, send });
    this.trimLater();
  }

  get remembered(): number {
    return this.recent.length;
  }

  private trim(now: number): void {
    const recent = this.recent;
    while (recent.length > 0 && now - recent[0].atMs > REPLAY_MS) recent.shift();
  }

  /** Trims once the oldest remembered send is past `REPLAY_MS` (one timer at a time; it keeps no process alive). */
  private trimLater(): void {
    if (this.trimTimer || this.recent.length === 0) return;
    const dueMs = this.recent[0].atMs + REPLAY_MS - performance.now() + 1;
    this.trimTimer = setTimeout(() => {
      this.trimTimer = null;
      this.trim(performance.now());
      this.trimLater();
    }, Math.max(1, dueMs));
    this.trimTimer.unref();
  }

  /** On a drop: what was sent in the last `REPLAY_MS` goes again once reconnected, before anything else. */
  private replayRecent(): void {
    const now = performance.now();
    const again = this.recent.filter((r) => now - r.atMs <= REPLAY_MS);
    this.recent = [];
    if (again.length === 0) return;
    const waiting = this.deferred;
    this.deferred = new Set();
    for (const r of again) this.defer(r.send, SEND_AFTER_RECONNECT_MS, () => {}, true);
    for (const d of waiting) this.deferred.add(d);
  }

  private defer(send: () => void, withinMs: number, gaveUp: () => void, keep: boolean): void {
    const d: Deferred = {
      send,
      gaveUp,
      keep,
      timer: setTimeout(() => {
        this.deferred.delete(d);
        gaveUp();
      }, withinMs),
    };
    this.deferred.add(d);
  }

  sendWhenUp(send: () => void, withinMs: number, gaveUp: () => void): void {
    if (this.nc.isClosed()) return send();
    if (!this.connected) return this.defer(send, withinMs, gaveUp, true);
    send();
    this.remember(send);
  }


  get connected(): boolean {
    if (this.nc.isClosed()) return false;
    // The library's own flag (nats.js keeps no public one): false from a drop until the reconnect.
    return (this.nc as NatsConnection & { protocol?: { connected?: boolean } }).protocol?.connected ?? true;
  }

  untilConnected(ms: number): Promise<boolean> {
    if (this.connected || this.nc.isClosed() || ms <= 0) return Promise.resolve(this.connected);
    return new Promise((resolve) => this.defer(() => resolve(true), ms, () => resolve(this.connected), false));
  }

  onNextDrop(fn: () => void): () => void {
    this.drops.add(fn);
    return () => this.drops.delete(fn);
  }

  onEveryReconnect(fn: () => void): () => void {
    this.reconnects.add(fn);
    return () => this.reconnects.delete(fn);
  }
}

/**
 * How long something a service must not lose (a worker's result, an acknowledgement) waits for a
 * dropped connection to come back before it is given up (the ack wait then redelivers the item).
 */
export const SEND_AFTER_RECONNECT_MS = 10_000;

/**
 * Runs `send` now when `nc` is up, else once it is back (within `SEND_AFTER_RECONNECT_MS`, first
 * of all that waits on the reconnect, in the order asked): nats.js drops what is published while
 * the connection is down. `gaveUp` hears of one that could not be sent.
 */
export function sendWhenUp(nc: NatsConnection, send: () => void, gaveUp: () => void = () => {}): void {
  watchConnection(nc).sendWhenUp(send, SEND_AFTER_RECONNECT_MS, gaveUp);
}

/**
 * Resolves true at once when `nc` is up, else once it is back (within `SEND_AFTER_RECONNECT_MS`),
 * false when it is not by then or is closed: a reply is awaited on this before it is sent, since
 * nats.js drops what is published while the connection is down.
 */
export function whenUp(nc: NatsConnection): Promise<boolean> {
  const watch = watchConnection(nc);
  return watch.connected ? Promise.resolve(true) : watch.untilConnected(SEND_AFTER_RECONNECT_MS);
}

/**
 * Runs `send` now (its throw is the caller's) and remembers it: if the connection drops within
 * `REPLAY_MS`, it runs again once the connection is back (what was written just before a drop may
 * be lost with the socket). For a reply whose caller waits: awaited on `whenUp` first.
 */
export function sendKept(nc: NatsConnection, send: () => void): void {
  send();
  watchConnection(nc).remember(send);
}

/** A reply whose caller waits: held while the connection is down (`whenUp`), then sent and kept (`sendKept`). */
export async function sendKeptWhenUp(nc: NatsConnection, send: () => void): Promise<void> {
  await whenUp(nc);
  sendKept(nc, send);
}

/**
 * After a reconnect, how long "no responders" reads as the responders still reconnecting (a
 * restarted nats-server: everyone reconnects at once) rather than as nobody serving.
 */
export const RESPONDERS_RECONNECT_MS = 5_000;
/** How often a request is asked again meanwhile. */
export const ASK_AGAIN_MS = 200;

/** True when `err` is "no responders" soon after `nc` reconnected and `leftMs` allows asking again (after `ASK_AGAIN_MS`). */
export function mayAskAgain(nc: NatsConnection, err: unknown, leftMs: number): boolean {
  return /no responders/i.test((err as Error)?.message ?? String(err)) && Date.now() - watchConnection(nc).reconnectedAtMs < RESPONDERS_RECONNECT_MS && leftMs > ASK_AGAIN_MS;
}

/** One request's end: the reply, the library's error (and whether the connection dropped meanwhile), or a drop before either. */
export type RequestAttempt = { msg: Msg } | { err: unknown; dropped: boolean } | "dropped";

/**
 * Sends one request. With `endOnDrop` it ends as "dropped" when the connection drops before the
 * reply comes: the request or its reply is then lost (nats.js drops what is published while the
 * connection is down, and a reply to an inbox nobody holds meanwhile is dropped by the server),
 * so a caller whose request can safely be asked twice sends it again once reconnected.
 */
export function requestAttempt(nc: NatsConnection, subject: string, data: Uint8Array, opts: { timeout: number; headers?: MsgHdrs }, endOnDrop: boolean): Promise<RequestAttempt> {
  return new Promise<RequestAttempt>((resolve) => {
    let dropped = false;
    const forget = watchConnection(nc).onNextDrop(() => {
      dropped = true;
      if (endOnDrop) resolve("dropped");
    });
    nc.request(subject, data, opts)
      .then((msg) => resolve({ msg }), (err: unknown) => resolve({ err, dropped }))
      .finally(forget);
  });
}

const watches = new WeakMap<NatsConnection, ConnectionWatch>();

/** The watch of `nc` (one per connection, however many callers ask). */
export function watchConnection(nc: NatsConnection): ConnectionWatch {
  let watch = watches.get(nc);
  if (!watch) watches.set(nc, (watch = new StatusWatch(nc)));
  return watch;
}

/** The inbox prefix a connection was opened with (`inboxPrefix`; the default when none). */
export function inboxPrefix(nc: NatsConnection): string | undefined {
  return (nc as NatsConnection & { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
}

/** How the work queue is kept. */
export interface WorkQueueOptions {
  storage: "file" | "memory";
  replicas: number;
  /** Ack wait of the per-model consumers, ms: an unacked item is redelivered after it. */
  ackWaitMs: number;
  /** Deliveries before an item is given up. */
  maxDeliver: number;
  /** Cap on queued items per model (bounded memory); a full queue rejects publishes. */
  maxMsgsPerModel: number;
  /** Window in which a repeated message id is dropped as duplicate, ms. */
  duplicateWindowMs: number;
  /**
   * How long a publish keeps retrying while the stream cannot answer (a cluster electing a new
   * stream leader), ms; repeats carry the same message id, so none is stored twice. 0 or absent: fail at once.
   */
  publishRetryMs?: number;
}

/** Defaults of the work queue. */
export const DEFAULT_WORK_QUEUE: WorkQueueOptions = {
  storage: "file",
  replicas: 1,
  ackWaitMs: 5_000,
  maxDeliver: 5,
  maxMsgsPerModel: 50_000,
  duplicateWindowMs: 120_000,
};

const ms2ns = (ms: number) => Math.round(ms * 1_000_000);
/** How long a JetStream publish waits for its acknowledgement by default (nats.js's own default). */
const PUBLISH_TIMEOUT_MS = 5_000;
/** Publish failures that a stream leader election explains (no responders, 503, timeouts, a closed-then-reopened connection). */
const RETRYABLE_PUBLISH = /no responders|not enabled|503|timeout|timed out|disconnect|reconnect|connection/i;

/** Age past which a queued work item is dropped: the longest deadline and a minute. */
export const WORK_ITEM_MAX_AGE_MS = MAX_DEADLINE_MS + 60_000;

/** The JetStream work queue: one stream, one durable pull consumer per model. */
export class WorkQueue {
  private readonly consumers = new Set<string>();
  private constructor(
    private readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly subjects: Subjects,
    private readonly options: WorkQueueOptions,
  ) {}

  /** Opens (creating if needed) the work stream. */
  static async open(nc: NatsConnection, subjects: Subjects, options: WorkQueueOptions = DEFAULT_WORK_QUEUE): Promise<WorkQueue> {
    const jsm = await jetstreamManager(nc);
    const name = subjects.names.workStream;
    const config = {
      name,
      subjects: [subjects.workAll],
      retention: RetentionPolicy.Workqueue,
      storage: options.storage === "memory" ? StorageType.Memory : StorageType.File,
      num_replicas: options.replicas,
      max_msgs_per_subject: options.maxMsgsPerModel,
      duplicate_window: ms2ns(options.duplicateWindowMs),
      // A full model queue refuses the new item (the router answers `overloaded`): without the
      // per-subject flag, `discard: new` applies to stream-wide limits only, and the server drops
      // the model's oldest queued item to make room, a request lost without a word.
      discard: "new" as const,
      discard_new_per_subject: true,
      // No item can be answered after its request's deadline (10 minutes at most): one older is
      // dead (its router gone before it could remove it, or delivered max_deliver times) and
      // would count against its model's queue limit for good.
      max_age: ms2ns(WORK_ITEM_MAX_AGE_MS),
    };
    let existing: StorageType | undefined;
    try {
      const info = await jsm.streams.info(name);
      existing = info.config.storage;
      // A stream made by an earlier version: what it lacks is set in place (an update keeps the items).
      if ((!info.config.discard_new_per_subject || !info.config.max_age) && existing === config.storage) {
        await jsm.streams.update(name, { ...info.config, discard: "new" as never, discard_new_per_subject: true, max_age: info.config.max_age || config.max_age }).catch((err: unknown) => {
          // (Under per-role users only the admin may: a full queue keeps dropping its oldest item until then.)
          createLogger("work-queue").warn("work_queue.upgrade_failed", { stream: name, error: (err as Error).message, fix: `nats stream edit ${name} --discard new --discard-per-subject --max-age ${WORK_ITEM_MAX_AGE_MS / 60_000}m (as the admin user)` });
        });
      }
    } catch {
      try {
        await jsm.streams.add(config as never);
      } catch (err) {
        // Another service created it first.
        if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
      }
    }
    // A stream keeps the storage it was made with: asking for the other one would be ignored.
    if (existing !== undefined && existing !== config.storage) {
      throw new Error(`the work stream ${name} already exists with ${existing} storage, not the ${config.storage} asked for: use another --data-dir (or --storage ${existing}), or delete the stream`);
    }
    return new WorkQueue(nc, jetstream(nc), jsm, subjects, options);
  }

  /** Ensures the pull consumer of a model exists. */
  async ensureConsumer(model: string): Promise<string> {
    const durable = this.subjects.names.workConsumer(model);
    if (this.consumers.has(durable)) return durable;
    const stream = this.subjects.names.workStream;
    // The settings a version may change: an existing consumer gets them (a changed ack wait or
    // delivery limit used to apply to new deployments only, silently).
    const settings = { ack_wait: ms2ns(this.options.ackWaitMs), max_deliver: this.options.maxDeliver, max_ack_pending: 100_000, max_waiting: 4096 };
    let existing: Awaited<ReturnType<JetStreamManager["consumers"]["info"]>> | null = null;
    try {
      existing = await this.jsm.consumers.info(stream, durable);
    } catch {
      try {
        await this.jsm.consumers.add(stream, {
          durable_name: durable,
          filter_subject: this.subjects.work(model),
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ...settings,
          num_replicas: this.options.replicas,
        });
      } catch (err) {
        if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
      }
    }
    const stale = existing ? (Object.keys(settings) as (keyof typeof settings)[]).filter((k) => existing!.config[k] !== settings[k]) : [];
    if (stale.length > 0) {
      await this.jsm.consumers.update(stream, durable, settings).catch((err: unknown) => {
        // (A user not allowed to change consumers keeps the old settings: said, not thrown.)
        createLogger("work-queue").warn("work_queue.consumer_upgrade_failed", { consumer: durable, settings: stale, error: (err as Error).message, fix: `nats consumer edit ${stream} ${durable} (as the admin user)` });
      });
    }
    this.consumers.add(durable);
    return durable;
  }

  /** Publishes a work item; `msgId` makes a repeat within the duplicate window a no-op. */
  async publish(model: string, data: Uint8Array, msgId: string, hdrs?: MsgHdrs): Promise<{ seq: number; duplicate: boolean }> {
    const h = hdrs ?? natsHeaders();
    const retryMs = this.options.publishRetryMs ?? 0;
    // Published while the connection is down, an item would be dropped by the library and the
    // publish would wait out its timeout: it waits for the reconnect first (at most as long as a
    // publish waits, or its retry window when longer), then publishes as before.
    const link = watchConnection(this.nc);
    if (!link.connected && !(await link.untilConnected(Math.max(retryMs, PUBLISH_TIMEOUT_MS)))) {
      throw new Error(`publish to ${this.subjects.work(model)}: not connected to NATS`);
    }
    if (retryMs <= 0) {
      try {
        const ack = await this.js.publish(this.subjects.work(model), data, { msgID: msgId, headers: h });
        return { seq: ack.seq, duplicate: ack.duplicate };
      } catch (err) {
        // A publish that timed out may have been stored: asked again under the same id, the stream
        // says (a duplicate's acknowledgement names its sequence). Failing instead left an item
        // that a worker would generate for a request already answered no_capacity.
        if (!/timeout|timed out/i.test(String((err as Error).message))) throw err;
        const ack = await this.js.publish(this.subjects.work(model), data, { msgID: msgId, headers: h, timeout: 2_000 });
        return { seq: ack.seq, duplicate: ack.duplicate };
      }
    }
    const deadline = Date.now() + retryMs;
    for (let attempt = 0; ; attempt++) {
      const remainingMs = deadline - Date.now();
      try {
        const ack = await this.js.publish(this.subjects.work(model), data, { msgID: msgId, headers: h, timeout: Math.max(250, Math.min(2_000, remainingMs)) });
        return { seq: ack.seq, duplicate: ack.duplicate };
      } catch (err) {
        if (remainingMs <= 0 || !RETRYABLE_PUBLISH.test(String((err as Error).message))) throw err;
        await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 500)));
      }
    }
  }

  /**
   * The item the stream still holds at `seq` (queued, or delivered and not yet acknowledged);
   * null when it is gone, undefined when the server did not say.
   */
  async itemAt(seq: number): Promise<Uint8Array | null | undefined> {
    try {
      return (await this.jsm.streams.getMessage(this.subjects.names.workStream, { seq }))?.data ?? null;
    } catch {
      return undefined;
    }
  }

  /** Drops the items queued for a model (with `beforeSeq`, only those published before it); returns how many. */
  async purge(model: string, beforeSeq?: number): Promise<number> {
    const filter = this.subjects.work(model);
    const r = await this.jsm.streams.purge(this.subjects.names.workStream, beforeSeq === undefined ? { filter } : { filter, seq: beforeSeq });
    return r.purged;
  }

  /** The work stream's last sequence: an item published from now on has a larger one. */
  async lastSeq(): Promise<number> {
    return (await this.jsm.streams.info(this.subjects.names.workStream)).state.last_seq;
  }

  /** Removes a queued item by stream sequence; false if it is already gone (taken or acknowledged). */
  async remove(seq: number): Promise<boolean> {
    return this.jsm.streams.deleteMessage(this.subjects.names.workStream, seq, false).catch(() => false);
  }

  /** Items waiting (not yet delivered) plus delivered but unacknowledged, per model. */
  async depth(model: string): Promise<{ pending: number; ackPending: number }> {
    const durable = await this.ensureConsumer(model);
    const info = await this.jsm.consumers.info(this.subjects.names.workStream, durable);
    return { pending: info.num_pending, ackPending: info.num_ack_pending };
  }

  /** Last deliveries of each model that reached a pull already ended (see `pull`). */
  private readonly lateDeliveries = new Map<string, Delivery[]>();
  private late(model: string): Delivery[] {
    let list = this.lateDeliveries.get(model);
    if (!list) this.lateDeliveries.set(model, (list = []));
    return list;
  }

  /**
   * Pulls up to `max` items of a model: waits at most `waitMs` for the first, then takes what is
   * there (JetStream's no_wait + expires). An aborted pull stops listening at once (the server
   * then drops it), handing back what was already on its way.
   */
  async pull(model: string, max: number, waitMs: number, signal: AbortSignal, lastCalledOff?: (delivery: Delivery) => void): Promise<Delivery[]> {
    const durable = await this.ensureConsumer(model);
    if (signal.aborted) return [];
    // Last deliveries that came after an earlier pull ended go first, at once (within the batch size).
    const late = this.late(model).splice(0, max);
    if (late.length > 0) return late;
    // nats.js drops what is published while the connection is down (its buffer is reset on each
    // reconnect): a pull asked then would never be heard. Asked once the connection is back.
    const link = watchConnection(this.nc);
    if (!link.connected && !(await link.untilConnected(Math.max(waitMs, 50)))) return [];
    if (signal.aborted) return [];
    // Under the connection's inbox prefix, as the libraries' own inboxes: a role's deliveries
    // go where only that role may subscribe.
    const inbox = createInbox(inboxPrefix(this.nc));
    const out: Delivery[] = [];
    return new Promise<Delivery[]>((resolve, reject) => {
      let finished = false;
      let failure: Error | null = null;
      let dropped = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        forgetDrop();
        signal.removeEventListener("abort", finish);
        if (failure && out.length === 0) reject(failure);
        else resolve(out);
        // An abandoned pull (the worker leaves the model) stops listening at once: the server
        // drops a pull nobody listens to, while one still listened to took an item every time
        // one came, only for it to be handed back, and five such deliveries used up an item
        // for good. It drains: an item the server sent before it heard (one in five to ten
        // pulls abandoned as an item arrives, in the test) is handed back at once, not lost
        // until its ack wait. Otherwise keep listening briefly: anything in flight is handed back.
        // Ended by a drop, it stops listening at once: nothing is on its way over a connection that
        // is down, and the library would subscribe it again on the reconnect.
        if (signal.aborted) void sub.drain().catch(() => undefined);
        else if (dropped) sub.unsubscribe();
        else setTimeout(() => sub.unsubscribe(), 2_000).unref();
      };
      const sub = this.nc.subscribe(inbox, {
        callback: (_err, msg) => {
          const status = msg.headers?.code ?? 0;
          if (status !== 0 || (msg.data.length === 0 && msg.headers?.hasError)) {
            if (status === 100) return; // idle heartbeat
            // Nobody answers pulls (JetStream or the consumer has no leader, or the consumer is
            // gone): an error, so the worker waits before asking again instead of spinning, and
            // the consumer is looked up (or made) afresh.
            if (status === 503 || (status === 409 && /deleted/i.test(msg.headers?.description ?? ""))) {
              this.consumers.delete(durable);
              failure = new Error(`pull from ${durable}: ${status} ${msg.headers?.description || "no responders"}`);
            }
            finish();
            return;
          }
          const delivery = toDelivery(this.nc, msg, this.options.maxDeliver, this.options.storage === "file");
          if (finished) {
            // Handed back for another pull; but a last delivery handed back is never delivered
            // again (its request would wait out its deadline): kept for this model's next pull,
            // or, when the pull was called off (the worker leaves the model, or stops: there may
            // be no next pull here), given to the worker to answer.
            if (!delivery.final) delivery.nak();
            else if (!signal.aborted) this.late(model).push(delivery);
            else if (lastCalledOff) lastCalledOff(delivery);
            else delivery.nak();
            return;
          }
          out.push(delivery);
          if (out.length >= max) finish();
        },
      });
      // The server ends every pull it holds by its expiry: silence well past that (a busy event
      // loop can delay its answer a little) means no consumer holds it (deleted, or never made on
      // this server), so it is looked up afresh next time.
      const timer = setTimeout(() => {
        this.consumers.delete(durable);
        failure = new Error(`pull from ${durable}: no answer from the server`);
        finish();
      }, waitMs + 3_000);
      signal.addEventListener("abort", finish, { once: true });
      // A pull the connection drops under is gone with it (a restarted server never heard of
      // it): ended at once, so the worker asks again once reconnected, instead of idling until
      // the silence above and then pausing as after an error.
      const forgetDrop = link.onNextDrop(() => {
        dropped = true;
        finish();
      });
      const request = { batch: max, expires: ms2ns(Math.max(waitMs, 1)), no_wait: true };
      this.nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${this.subjects.names.workStream}.${durable}`, JSON.stringify(request), { reply: inbox });
    });
  }
}

/**
 * The delivery count a JetStream ack subject carries: `$JS.ACK.<stream>.<consumer>.<delivered>.…`
 * (9 tokens), or with a domain and account hash before the stream (12 tokens); undefined otherwise.
 */
export function deliveryCountOf(reply: string | undefined): number | undefined {
  if (!reply?.startsWith("$JS.ACK.")) return undefined;
  const tokens = reply.split(".");
  const at = tokens.length === 9 ? 4 : tokens.length >= 11 ? 6 : -1;
  const n = at < 0 ? NaN : Number(tokens[at]);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

function toDelivery(nc: NatsConnection, msg: Msg, maxDeliver: number, kept: boolean): Delivery {
  const reply = msg.reply;
  const deliveryCount = deliveryCountOf(reply);
  const final = deliveryCount !== undefined && maxDeliver > 0 && deliveryCount >= maxDeliver;
  const publish = (body: string) => {
    try {
      nc.publish(reply!, body);
    } catch {
      // A closing connection: nothing can be said; the item comes back after its ack wait.
    }
  };
  // The server that delivered it: an acknowledgement names the item by its stream sequence, which
  // a stream in memory starts again after a restart (another item would be acknowledged).
  const server = nc.info?.server_id;
  /** A worker's last word on an item (ack, term): held through a dropped connection, else it would run again after its ack wait. */
  const settle = (body: string) => {
    if (!reply) return;
    sendWhenUp(nc, () => void ((kept || nc.info?.server_id === server) && publish(body)));
  };
  /** A nak or "in progress": only while connected (sent late, it would act on a redelivery the ack wait made meanwhile). */
  const signal = (body: string) => {
    if (reply && watchConnection(nc).connected) publish(body);
  };
  return {
    data: msg.data,
    ack: () => settle("+ACK"),
    nak: () => signal("-NAK"),
    term: () => settle("+TERM"),
    working: () => signal("+WPI"),
    header: (name) => msg.headers?.get(name) || undefined,
    ...(deliveryCount !== undefined ? { deliveryCount } : {}),
    ...(final ? { final } : {}),
  };
}

/** The plan's KV bucket. */
export async function openPlanBucket(nc: NatsConnection, subjects: Subjects, replicas = 1, storage: "file" | "memory" = "file"): Promise<KV> {
  const kvm = new Kvm(nc);
  return kvm.create(subjects.names.planBucket, { history: 10, replicas, storage: storage === "memory" ? StorageType.Memory : StorageType.File });
}

/** How long results of keyed requests are kept, ms (the idempotency window). */
export const RESULTS_TTL_MS = 10 * 60_000;

/**
 * Most bytes the results bucket holds (each replica): about 2,700 images of 1.5 MB. Full, it
 * refuses new results (a retry of such a request generates again) rather than fill the disk the
 * work queue and the plan live on. A bucket made before keeps its own limits.
 */
export const RESULTS_MAX_BYTES = 4 * 1024 ** 3;

/** The bucket of results of requests with an idempotency key. */
export async function openResultsBucket(nc: NatsConnection, subjects: Subjects, replicas = 1, maxBytes = RESULTS_MAX_BYTES): Promise<KV> {
  const kvm = new Kvm(nc);
  return kvm.create(subjects.names.resultsBucket, { history: 1, replicas, ttl: RESULTS_TTL_MS, storage: StorageType.File, max_bytes: maxBytes });
}

/** Calls `onValue` with the current value of `key` and every later one, until `signal` aborts. */
export async function watchKey(kv: KV, key: string, onValue: (data: Uint8Array) => void, signal: AbortSignal): Promise<void> {
  const iter = await kv.watch({ key });
  // Aborted while the watch was being made (its owner closed): no listener would ever stop it.
  if (signal.aborted) {
    iter.stop();
    return;
  }
  signal.addEventListener("abort", () => iter.stop(), { once: true });
  void (async () => {
    for await (const entry of iter) {
      if (entry.operation === "PUT" && entry.value.length > 0) onValue(entry.value);
    }
  })();
}

/** Starts a NATS micro service (answers `$SRV.PING|INFO|STATS`). */
export async function startService(nc: NatsConnection, config: ServiceConfig): Promise<Service> {
  return new Svcm(nc).add(config);
}

/** The encoding a request asked for (JSON by `Content-Type`, msgpack otherwise). */
export function requestEncoding(msg: Msg): Encoding {
  const ct = msg.headers?.get(Headers.contentType) ?? "";
  return ct.toLowerCase().startsWith(ContentTypes.json) ? "json" : "msgpack";
}

function contentHeaders(encoding: Encoding): MsgHdrs {
  const h = natsHeaders();
  h.set(Headers.contentType, encoding === "json" ? ContentTypes.json : ContentTypes.msgpack);
  return h;
}

/** Replies with a message in the caller's encoding. */
export function replyWith(msg: Msg, body: unknown, encoding: Encoding): boolean {
  if (!msg.reply) return false;
  const data = encodeAs(body, encoding);
  try {
    return msg.respond(data, { headers: contentHeaders(encoding) });
  } catch (err) {
    throw isPayloadTooLarge(err) ? payloadTooLarge("the reply", data.byteLength) : err;
  }
}

/** Whether `err` is the client library refusing a message over the server's `max_payload`. */
export function isPayloadTooLarge(err: unknown): boolean {
  return err instanceof Error && /max_payload size exceeded/.test(err.message);
}

/** The typed error for a message over the server's `max_payload`, saying what to change. */
export function payloadTooLarge(what: string, bytes: number): HadisError {
  return new HadisError("payload_too_large", `${what} is ${bytes} bytes, over the NATS server's max_payload: set max_payload to ${MAX_PAYLOAD_BYTES} (8 MiB) in its config, as the embedded server and ops/nats/*.conf do`);
}

/** A warning when the server's `max_payload` is below what images need (a stock nats-server allows 1 MiB; a 1024² PNG is often more). */
export function maxPayloadWarning(nc: NatsConnection): string | null {
  const max = nc.info?.max_payload;
  return max !== undefined && max < MAX_PAYLOAD_BYTES ? `the NATS server's max_payload is ${max} bytes, under the ${MAX_PAYLOAD_BYTES} images may need: larger images and replies fail with payload_too_large (set max_payload: ${MAX_PAYLOAD_BYTES} in its config)` : null;
}

/**
 * Replies with a typed error: `Nats-Service-Error` / `Nats-Service-Error-Code` headers and the
 * typed error body in the caller's encoding.
 */
export function replyError(msg: Msg | ServiceMsg, err: unknown, encoding: Encoding): boolean {
  if (!msg.reply) return false;
  const e = asHadisError(err);
  const body = encodeAs(toWireError(e, PROTOCOL_VERSION), encoding);
  const h = contentHeaders(encoding);
  // A message may quote what the caller sent; a header value may not hold CR or LF (the body keeps them).
  const text = `${e.code}: ${e.message}`.replace(/[\r\n]+/g, " ");
  if ("respondError" in msg) return msg.respondError(e.status, text, body, { headers: h });
  h.set(Headers.serviceError, text);
  h.set(Headers.serviceErrorCode, String(e.status));
  return msg.respond(body, { headers: h });
}
