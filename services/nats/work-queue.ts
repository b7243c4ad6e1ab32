/**
 * The JetStream work queue: one stream, one durable pull consumer per model, batched pulls, and
 * the deliveries a worker acknowledges (held through a dropped connection).
 *
 * Streams, consumers, publishes, purges and look-ups go through nats.js's public JetStream API.
 * The pull and its deliveries (`pull`, `toDelivery`) are the one part driven by hand, on the
 * JetStream wire protocol (`$JS.API.CONSUMER.MSG.NEXT` with `no_wait` and `expires`, `+ACK`,
 * `-NAK`, `+WPI`, `+TERM` on the reply subject), because `consumer.fetch()`/`consume()` and
 * `JsMsg` cannot carry what a worker needs (each checked in work-queue.test.ts against a real
 * server): a worker takes what is queued at once, up to its batch size, and waits only for the
 * first item (`fetch()` holds a batch open until it is full or expires, and refuses an expiry
 * under a second; `consume()` would prefetch items for a worker that is busy, while idle ones
 * wait); a pull given up by a re-plan hands back, at once, items already on their way, and keeps
 * an item's last delivery for the worker to answer rather than dropping it; a settlement is held
 * through a dropped connection and sent only to the server that delivered the item (a stream in
 * memory restarts its sequences); a pull the connection drops under ends at once.
 */
import { createInbox, headers as natsHeaders, type Msg, type MsgHdrs } from "@nats-io/nats-core";
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import type { Subjects } from "../../contracts/subjects.ts";
import { MAX_DEADLINE_MS, type WorkItem } from "../../contracts/messages.ts";
import { readWorkItem, type RefusedWorkItem } from "../../contracts/work-items.ts";
import type { Delivery } from "../../actors/worker/worker-agent.ts";
import { createLogger } from "../telemetry/log.ts";
import { inboxPrefix, sendWhenUp, watchConnection, type NatsConnection } from "./connection.ts";
import { ConfigurationError, DependencyError } from "../../contracts/errors.ts";

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

/**
 * Where items wait: a model's shared queue (its name), or one worker's own queue (the artifact's
 * random dispatch sends each item to one worker).
 */
export type Lane = string | { worker: string };

/** The JetStream work queue: one stream, one durable pull consumer per model (and per worker under random dispatch). */
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
        await jsm.streams
          .update(name, {
            ...info.config,
            discard: "new" as never,
            discard_new_per_subject: true,
            max_age: info.config.max_age || config.max_age,
          })
          .catch((err: unknown) => {
            // (Under per-role users only the admin may: a full queue keeps dropping its oldest item until then.)
            createLogger("work-queue").warn("work_queue.upgrade_failed", {
              stream: name,
              error: (err as Error).message,
              fix: `nats stream edit ${name} --discard new --discard-per-subject --max-age ${WORK_ITEM_MAX_AGE_MS / 60_000}m (as the admin user)`,
            });
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
      throw new ConfigurationError(
        `the work stream ${name} already exists with ${existing} storage, not the ${config.storage} asked for: use another --data-dir (or --storage ${existing}), or delete the stream`,
      );
    }
    return new WorkQueue(nc, jetstream(nc), jsm, subjects, options);
  }

  private subjectOf(lane: Lane): string {
    return typeof lane === "string" ? this.subjects.work(lane) : this.subjects.workerQueue(lane.worker);
  }

  /** Ensures the pull consumer of a lane (a model, or a worker's own queue) exists. */
  async ensureConsumer(lane: Lane): Promise<string> {
    const durable = typeof lane === "string" ? this.subjects.names.workConsumer(lane) : this.subjects.names.workerConsumer(lane.worker);
    if (this.consumers.has(durable)) return durable;
    const stream = this.subjects.names.workStream;
    // The settings a version may change: an existing consumer gets them (a changed ack wait or
    // delivery limit used to apply to new deployments only, silently).
    const settings = {
      ack_wait: ms2ns(this.options.ackWaitMs),
      max_deliver: this.options.maxDeliver,
      max_ack_pending: 100_000,
      max_waiting: 4096,
    };
    let existing: Awaited<ReturnType<JetStreamManager["consumers"]["info"]>> | null = null;
    try {
      existing = await this.jsm.consumers.info(stream, durable);
    } catch {
      try {
        await this.jsm.consumers.add(stream, {
          durable_name: durable,
          filter_subject: this.subjectOf(lane),
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
        createLogger("work-queue").warn("work_queue.consumer_upgrade_failed", {
          consumer: durable,
          settings: stale,
          error: (err as Error).message,
          fix: `nats consumer edit ${stream} ${durable} (as the admin user)`,
        });
      });
    }
    this.consumers.add(durable);
    return durable;
  }

  /** Publishes a work item; `msgId` makes a repeat within the duplicate window a no-op. */
  async publish(lane: Lane, data: Uint8Array, msgId: string, hdrs?: MsgHdrs): Promise<{ seq: number; duplicate: boolean }> {
    const subject = this.subjectOf(lane);
    const h = hdrs ?? natsHeaders();
    const retryMs = this.options.publishRetryMs ?? 0;
    // Published while the connection is down, an item would be dropped by the library and the
    // publish would wait out its timeout: it waits for the reconnect first (at most as long as a
    // publish waits, or its retry window when longer), then publishes as before.
    const link = watchConnection(this.nc);
    if (!link.connected && !(await link.untilConnected(Math.max(retryMs, PUBLISH_TIMEOUT_MS)))) {
      throw new DependencyError(`publish to ${subject}: not connected to NATS`);
    }
    if (retryMs <= 0) {
      try {
        const ack = await this.js.publish(subject, data, { msgID: msgId, headers: h });
        return { seq: ack.seq, duplicate: ack.duplicate };
      } catch (err) {
        // A publish that timed out may have been stored: asked again under the same id, the stream
        // says (a duplicate's acknowledgement names its sequence). Failing instead left an item
        // that a worker would generate for a request already answered no_capacity.
        if (!/timeout|timed out/i.test(String((err as Error).message))) throw err;
        const ack = await this.js.publish(subject, data, { msgID: msgId, headers: h, timeout: 2_000 });
        return { seq: ack.seq, duplicate: ack.duplicate };
      }
    }
    const deadline = Date.now() + retryMs;
    for (let attempt = 0; ; attempt++) {
      const remainingMs = deadline - Date.now();
      try {
        const ack = await this.js.publish(subject, data, {
          msgID: msgId,
          headers: h,
          timeout: Math.max(250, Math.min(2_000, remainingMs)),
        });
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
    const r = await this.jsm.streams.purge(
      this.subjects.names.workStream,
      beforeSeq === undefined ? { filter } : { filter, seq: beforeSeq },
    );
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

  /** Items waiting (not yet delivered) plus delivered but unacknowledged, per lane. */
  async depth(lane: Lane): Promise<{ pending: number; ackPending: number }> {
    const durable = await this.ensureConsumer(lane);
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
   * then drops it), handing back what was already on its way. Each item is read and checked here:
   * one that does not read is terminated (never delivered again) and given to `refused`, for its
   * router to be told; the worker gets typed items only.
   */
  async pull(
    lane: Lane,
    max: number,
    waitMs: number,
    signal: AbortSignal,
    lastCalledOff?: (delivery: Delivery) => void,
    refused?: (item: RefusedWorkItem) => void,
  ): Promise<Delivery[]> {
    const durable = await this.ensureConsumer(lane);
    const model = typeof lane === "string" ? lane : `@${lane.worker}`;
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
    /** Messages this pull received, refused ones included: the server sends at most `max`. */
    let received = 0;
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
              failure = new DependencyError(`pull from ${durable}: ${status} ${msg.headers?.description || "no responders"}`);
            }
            finish();
            return;
          }
          received++;
          const read = readWorkItem(msg.data);
          const settle = settler(this.nc, msg, this.options.storage === "file");
          if ("refused" in read) {
            settle("+TERM");
            refused?.(read.refused);
            if (!finished && received >= max) finish();
            return;
          }
          const delivery = toDelivery(this.nc, msg, read.item, settle, this.options.maxDeliver);
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
          if (received >= max) finish();
        },
      });
      // The server ends every pull it holds by its expiry: silence well past that (a busy event
      // loop can delay its answer a little) means no consumer holds it (deleted, or never made on
      // this server), so it is looked up afresh next time.
      const timer = setTimeout(() => {
        this.consumers.delete(durable);
        failure = new DependencyError(`pull from ${durable}: no answer from the server`);
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

/**
 * A worker's last word on a delivered message (ack, term): held through a dropped connection,
 * else the item would run again after its ack wait; sent only to the server that delivered it
 * when the stream is in memory (an acknowledgement names the item by its stream sequence, which
 * such a stream starts again after a restart: another item would be acknowledged).
 */
function settler(nc: NatsConnection, msg: Msg, kept: boolean): (body: string) => void {
  const reply = msg.reply;
  const server = nc.info?.server_id;
  return (body) => {
    if (!reply) return;
    sendWhenUp(nc, () => void ((kept || nc.info?.server_id === server) && publishQuietly(nc, reply, body)));
  };
}

/** Publishes, saying nothing on a closing connection (the item comes back after its ack wait). */
function publishQuietly(nc: NatsConnection, subject: string, body: string): void {
  try {
    nc.publish(subject, body);
  } catch {
    // A closing connection: nothing can be said.
  }
}

function toDelivery(nc: NatsConnection, msg: Msg, item: WorkItem, settle: (body: string) => void, maxDeliver: number): Delivery {
  const reply = msg.reply;
  const deliveryCount = deliveryCountOf(reply);
  const final = deliveryCount !== undefined && maxDeliver > 0 && deliveryCount >= maxDeliver;
  /** A nak or "in progress": only while connected (sent late, it would act on a redelivery the ack wait made meanwhile). */
  const signal = (body: string) => {
    if (reply && watchConnection(nc).connected) publishQuietly(nc, reply, body);
  };
  return {
    item,
    ack: () => settle("+ACK"),
    nak: () => signal("-NAK"),
    term: () => settle("+TERM"),
    working: () => signal("+WPI"),
    header: (name) => msg.headers?.get(name) || undefined,
    ...(deliveryCount !== undefined ? { deliveryCount } : {}),
    ...(final ? { final } : {}),
  };
}
