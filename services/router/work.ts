/**
 * The router's queued work: the items it waits on (`PendingWork`), the results that answer them,
 * and what keeps them from being stranded: a plan that leaves a model without workers moves its
 * items or refuses them, an item the server gives up on fails its stage at once, and results lost
 * while the connection was down are found again once it is back.
 */
import type { HadisError } from "../../contracts/errors.ts";
import type { Plan } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import { planMechanisms } from "../../actors/artifact/mechanisms.ts";
import { GenerationFloor } from "../../actors/routing/generation-floor.ts";
import type { Logger } from "../telemetry/log.ts";
import type { ServiceTelemetry } from "../telemetry/tracing.ts";
import { onReconnect, type KV, type NatsConnection } from "../nats/connection.ts";
import { openResultsBucket } from "../nats/kv-buckets.ts";
import type { PlanView } from "../nats/plan-view.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import { watchCapacity } from "./capacity-watch.ts";
import { failGivenUp } from "./given-up.ts";
import { createMover } from "./mover.ts";
import { moveTarget, PendingWork, type PendingItem } from "./pending.ts";
import { pathEstimator, type PathEstimator } from "./path-estimate.ts";
import { recoverLost, RECOVER_AFTER_MS, singleFlight } from "./recover.ts";

/** What the router's queued work needs. */
export interface RouterWorkOptions {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  plans: PlanView;
  /** This router's results subject: workers publish each item's result there. */
  resultsSubject: string;
  telemetry: ServiceTelemetry;
  log: Logger;
  /** A worker silent this long is gone. */
  silentAfterMs: number;
}

/** The router's queued work, for the request machine's actors and the router's stats. */
export interface RouterWork {
  readonly pending: PendingWork;
  /** Results of keyed requests, written by workers. */
  readonly results: KV;
  /** Each model's fastest recent generation: a rejected light image is escalated only if the time left covers it. */
  readonly floor: GenerationFloor;
  /** hadis-plus's estimate of the path ahead of a request (its admission and escalation check). */
  readonly paths: PathEstimator;
  /** Called once an item's publish is acknowledged: an item queued for a model the plan just left is moved. */
  afterEnqueue(entry: PendingItem): void;
  /** The refusal for work on a model no worker serves now, or null. */
  capacity(model: string, plan: Plan | null): HadisError | null;
  /** Stops sweeping for stranded items (a stop's first step). */
  stopSweeping(): void;
  /** Stops the subscriptions and watches. */
  stop(): void;
}

/** Opens the results bucket and starts watching the router's queued work. */
export async function startRouterWork(o: RouterWorkOptions): Promise<RouterWork> {
  const { nc, subjects, queue, plans, log, telemetry } = o;
  const pending = new PendingWork((seq) => void queue.remove(seq));
  const floor = new GenerationFloor();
  const results = await openResultsBucket(nc, subjects);
  /** Moves a waiting item off a model the plan no longer serves (removed by sequence, re-queued). */
  const move = createMover({ queue, pending, results, telemetry, log, afterEnqueue: (entry) => afterEnqueue(entry) });
  const rescue = (entry: PendingItem, to: string, plan: Plan) => void move(entry, to, plan);
  // Which workers are alive, from their heartbeats: work for a model none of them serves is
  // refused at once (`no_capacity`), not queued to wait out its deadline.
  const workers = watchCapacity(nc, subjects, log, o.silentAfterMs);
  // A plan that leaves a model without workers must not strand the items queued for it: check on
  // every plan, and sweep once a second for items a worker handed back after the plan arrived.
  // Items of a model the plan gives no worker any more, and no other model can take over, are
  // answered now (`no_capacity`) rather than at their deadline.
  const sweep = (plan: Plan | null) => {
    // Under the artifact's random dispatch items wait in workers' own queues, which they run whatever model they hold.
    if (planMechanisms(plan).has("dispatch")) return;
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
      if (entry.own !== false) void queue.remove(entry.seq).catch(() => false);
    }
  };
  plans.onPlan(sweep);
  const sweepTimer = setInterval(() => sweep(plans.current), 1_000);
  sweepTimer.unref();
  // An item whose publish was acknowledged after such a plan arrived gets the same check.
  const afterEnqueue = (entry: PendingItem) => {
    const plan = plans.current;
    if (entry.lane) return;
    const to = plan ? moveTarget(plan, entry.stage, entry.item.model) : null;
    if (plan && to) rescue(entry, to, plan);
  };
  const resultsSub = nc.subscribe(o.resultsSubject, { callback: (_e, m) => pending.deliver(m.data) });
  // An item the server will not deliver again (its last delivery's worker crashed) fails its stage now, not at the deadline.
  const givenUpSub = nc.subscribe(subjects.workGivenUp, {
    callback: (err, m) => {
      // Refused (a role without the permission): the server closes the subscription, said once.
      if (err)
        log.error("router.given_up_unwatched", {
          error: err.message,
          fix: `allow this router's user to subscribe to ${subjects.workGivenUp}`,
        });
      else failGivenUp({ queue, pending, workStream: subjects.names.workStream, log }, m.data);
    },
  });
  // Results sent while the connection was down are gone: once back, what they answered is found again.
  const recover = singleFlight(() =>
    recoverLost({ queue, pending, results, telemetry, log })
      .then((n) => n > 0 && log.warn("router.recovered_after_reconnect", { items: n }))
      .catch((err) => log.warn("router.recover_failed", { error: (err as Error).message })),
  );
  const stopReconnectWatch = onReconnect(nc, () => {
    // Heartbeats were missed meanwhile: no worker is taken for gone until they could have come again.
    workers.listenAgain();
    setTimeout(recover, RECOVER_AFTER_MS).unref();
  });
  return {
    pending,
    results,
    floor,
    paths: pathEstimator(pending, floor),
    afterEnqueue,
    capacity: workers.refusal,
    stopSweeping: () => clearInterval(sweepTimer),
    stop() {
      clearInterval(sweepTimer);
      resultsSub.unsubscribe();
      givenUpSub.unsubscribe();
      workers.stop();
      stopReconnectWatch();
    },
  };
}
