/**
 * NATS connections: connecting (and waiting for a server that is not up yet), headers, and
 * what a service does around a dropped connection (held, kept and replayed sends, requests asked
 * again). The folder `services/nats/` holds the only modules that talk to the NATS client
 * libraries.
 */
import { retryWhile } from "../lifecycle/running.ts";
import { connectedNow, connectionInboxPrefix } from "./private.ts";
import { connect, type NodeConnectionOptions } from "@nats-io/transport-node";
import {
  createInbox,
  headers as natsHeaders,
  Match,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from "@nats-io/nats-core";
import type { JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { Service, ServiceMsg } from "@nats-io/services";

export type { Msg, MsgHdrs, NatsConnection, Service, ServiceMsg, Subscription, KV, JetStreamClient };

export { DEFAULT_NATS_URL } from "../../contracts/limits.ts";

/** Connects with endless reconnects (services outlive server restarts and fail-overs). */
export async function connectNats(
  servers: string | string[],
  name: string,
  extra: Partial<NodeConnectionOptions> = {},
): Promise<NatsConnection> {
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
  for (
    let e = err as { name?: string; message?: string; code?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 5;
    e = e.cause as typeof e, depth++
  ) {
    if (e.name === "TimeoutError" || e.code === 503 || e.code === "503") return true;
    if (/temporarily unavailable|insufficient resources|no suitable peers|jetstream not (enabled|ready)/i.test(e.message ?? ""))
      return true;
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
export function connectWhenUp(
  servers: string | string[],
  name: string,
  extra: Partial<NodeConnectionOptions>,
  waitMs: number,
  waiting: (err: unknown) => void = () => {},
): Promise<NatsConnection> {
  const connectWithin = (leftMs: number) =>
    connectNats(servers, name, waitMs > 0 ? { ...extra, timeout: Math.max(1_000, Math.min(extra.timeout ?? 20_000, leftMs)) } : extra);
  return retryWhile(connectWithin, isServerNotUp, waitMs, NATS_WAIT_RETRY_MS, waiting);
}

/** TLS files of a NATS connection: a CA to trust, and a client certificate and key for mutual TLS. */
export interface NatsTlsFiles {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** A user and password for one NATS connection. */
export interface NatsCredentials {
  user: string;
  pass: string;
  /** The user is this service's role's own (`HADIS_<ROLE>_NATS_USER`): it connects with the role's inbox prefix. */
  ownRole?: boolean;
}

/** A new NATS header set. */
export const newHeaders = natsHeaders;

/**
 * A header's value with its name matched in any case ("" when absent): header names are
 * case-insensitive to NATS users (`content-type` from a raw client is `Content-Type`), where
 * nats.js's `get` matches them exactly.
 */
export function headerOf(headers: MsgHdrs | undefined, name: string): string {
  return headers?.get(name, Match.IgnoreCase) ?? "";
}

/** A unique inbox subject. */
export const newInbox = createInbox;

/** Calls `fn` after each reconnect of `nc` until the returned function is called (a service's stop: the connection may outlive it). */
export function onReconnect(nc: NatsConnection, fn: () => void): () => void {
  return watchConnection(nc).onEveryReconnect(fn);
}

/** A connection's ups and downs, as a caller waiting on replies needs them (readiness reads its own: `ConnectionReadiness` in services/telemetry/health.ts). */
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
    this.trimTimer = setTimeout(
      () => {
        this.trimTimer = null;
        this.trim(performance.now());
        this.trimLater();
      },
      Math.max(1, dueMs),
    );
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
    // The library's own flag (nats.js keeps no public one): false from a drop until the reconnect.
    return connectedNow(this.nc);
  }

  untilConnected(ms: number): Promise<boolean> {
    if (this.connected || this.nc.isClosed() || ms <= 0) return Promise.resolve(this.connected);
    return new Promise((resolve) =>
      this.defer(
        () => resolve(true),
        ms,
        () => resolve(this.connected),
        false,
      ),
    );
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
  return (
    /no responders/i.test((err as Error)?.message ?? String(err)) &&
    Date.now() - watchConnection(nc).reconnectedAtMs < RESPONDERS_RECONNECT_MS &&
    leftMs > ASK_AGAIN_MS
  );
}

/** One request's end: the reply, the library's error (and whether the connection dropped meanwhile), or a drop before either. */
export type RequestAttempt = { msg: Msg } | { err: unknown; dropped: boolean } | "dropped";

/**
 * Sends one request. With `endOnDrop` it ends as "dropped" when the connection drops before the
 * reply comes: the request or its reply is then lost (nats.js drops what is published while the
 * connection is down, and a reply to an inbox nobody holds meanwhile is dropped by the server),
 * so a caller whose request can safely be asked twice sends it again once reconnected.
 */
export function requestAttempt(
  nc: NatsConnection,
  subject: string,
  data: Uint8Array,
  opts: { timeout: number; headers?: MsgHdrs },
  endOnDrop: boolean,
): Promise<RequestAttempt> {
  return new Promise<RequestAttempt>((resolve) => {
    let dropped = false;
    const forget = watchConnection(nc).onNextDrop(() => {
      dropped = true;
      if (endOnDrop) resolve("dropped");
    });
    nc.request(subject, data, opts)
      .then(
        (msg) => resolve({ msg }),
        (err: unknown) => resolve({ err, dropped }),
      )
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
  return connectionInboxPrefix(nc);
}
