/**
 * A service's view of the plan: the newest epoch seen in KV (stale epochs are ignored). The KV
 * watch delivers each plan; the manager's notice on `hadis.plan` names each new epoch too, and a
 * notice the watch has not caught up with within `RESYNC_AFTER_MS` re-opens the watch (whose
 * first delivery is the plan now in the bucket): a watch whose consumer was lost with a server
 * would otherwise notice only after its missed heartbeats, a minute on.
 */
import { decode } from "../../contracts/envelope.ts";
import { PlanNoticeSchema, PlanSchema, type Plan } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import type { KV, NatsConnection, Subscription } from "./connection.ts";
import { openPlanBucket, watchKey } from "./kv-buckets.ts";
import type { Logger } from "../telemetry/log.ts";

/** How long a notice of a newer epoch waits for the watch before the watch is re-opened. */
const RESYNC_AFTER_MS = 1_000;

/** Follows the plan in KV. */
export class PlanView {
  private plan: Plan | null = null;
  private waiters: (() => void)[] = [];
  private readonly listeners: ((plan: Plan) => void)[] = [];
  private watch = new AbortController();
  private notices: Subscription | null = null;
  private resync: NodeJS.Timeout | null = null;
  /** The newest epoch a notice named. */
  private announced = 0;
  /** Times the watch was re-opened because a notice was ahead of it. */
  resyncs = 0;
  private constructor(private readonly log: Logger) {}

  /** Opens the bucket and starts watching; the current plan (if any) arrives first. */
  static async open(nc: NatsConnection, subjects: Subjects, log: Logger, replicas = 1): Promise<{ view: PlanView; kv: KV }> {
    const view = new PlanView(log);
    const kv = await openPlanBucket(nc, subjects, replicas);
    const key = subjects.names.planKey;
    await watchKey(kv, key, (data) => view.offer(data), view.watch.signal);
    const resyncWatch = () => {
      view.resyncs++;
      log.warn("plan.watch_behind", { held: view.plan?.epoch ?? 0, announced: view.announced });
      view.watch.abort();
      view.watch = new AbortController();
      void watchKey(kv, key, (data) => view.offer(data), view.watch.signal).catch((err) =>
        log.warn("plan.watch_failed", { error: (err as Error).message }),
      );
    };
    /** Gives the watch a second to deliver `epoch`; a newer epoch announced meanwhile gets its own second if the watch kept up with this one. */
    const check = (epoch: number) => {
      view.resync = setTimeout(() => {
        view.resync = null;
        const held = view.plan?.epoch ?? 0;
        if (held < epoch) {
          resyncWatch();
          check(view.announced); // and see that the new watch delivers it
        } else if (held < view.announced) check(view.announced);
      }, RESYNC_AFTER_MS);
    };
    view.notices = nc.subscribe(subjects.planBroadcast, {
      callback: (_err, msg) => {
        let epoch: number;
        try {
          epoch = decode(PlanNoticeSchema, msg.data, "plan notice").epoch;
        } catch {
          return; // (a plan notice that does not read changes nothing: the watch still runs)
        }
        view.announced = Math.max(view.announced, epoch);
        if ((view.plan?.epoch ?? 0) >= epoch || view.resync) return;
        check(epoch);
      },
    });
    return { view, kv };
  }

  /** Takes an encoded plan (from the bucket or its watch); ignores it if malformed or older than the one held. */
  offer(data: Uint8Array): void {
    let plan: Plan;
    try {
      plan = decode(PlanSchema, data, "plan");
    } catch (err) {
      this.log.warn("plan.rejected", { error: (err as Error).message });
      return;
    }
    this.adopt(plan);
  }

  /** Takes a plan already checked against its schema (the manager's own, as written); ignores it if older than the one held. */
  adopt(plan: Plan): void {
    if (this.plan && plan.epoch <= this.plan.epoch) return;
    this.plan = plan;
    this.waiters.splice(0).forEach((w) => w());
    for (const l of this.listeners) l(plan);
  }

  /** The plan in force, or null before the first. */
  get current(): Plan | null {
    return this.plan;
  }

  /** Calls `listener` on every newer plan. */
  onPlan(listener: (plan: Plan) => void): void {
    this.listeners.push(listener);
    if (this.plan) listener(this.plan);
  }

  /** Resolves with the plan once there is one, or null after `timeoutMs`. */
  async waitForPlan(timeoutMs: number): Promise<Plan | null> {
    return this.waitForEpoch(0, timeoutMs);
  }

  /**
   * Resolves with the plan once its epoch is at least `epoch` (one another service already
   * follows), or with the plan held (maybe older, maybe none) after `timeoutMs`.
   */
  async waitForEpoch(epoch: number, timeoutMs: number): Promise<Plan | null> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (this.plan && this.plan.epoch >= epoch) return this.plan;
      const left = end - Date.now();
      if (left <= 0) return this.plan;
      await this.next(left);
    }
  }

  /** Resolves at the next newer plan, or after `timeoutMs`. */
  private async next(timeoutMs: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const waiter = () => {
        clearTimeout(t);
        resolve();
      };
      // A wait that times out leaves the list (requests keep coming while no manager runs).
      const t = setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve();
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Stops watching. */
  close(): void {
    this.watch.abort();
    this.notices?.unsubscribe();
    if (this.resync) clearTimeout(this.resync);
  }
}
