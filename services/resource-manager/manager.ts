/**
 * The resource manager: a reconciler. Each tick takes a snapshot (live workers from heartbeats,
 * demand from router reports, queue depths), asks the planning policy for a decision, names the
 * workers (moving as few as possible) and publishes a new plan epoch to KV when anything changed.
 * A failing tick is logged, never fatal.
 */
import { decode, encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, RouterStatsSchema, WorkerHeartbeatSchema, type Plan } from "../../contracts/messages.ts";
import { ServiceNames, type Subjects } from "../../contracts/subjects.ts";
import type { PlanDecision } from "../../actors/control/decision.ts";
import { WorkerInventory, type KnownWorker } from "../../actors/control/inventory.ts";
import { assignWorkers, nextPlan } from "../../actors/control/reconcile.ts";
import type { Logger } from "../lib/log.ts";
import { startService, type NatsConnection, type WorkQueue } from "../lib/nats.ts";
import { PlanView } from "../lib/plan-view.ts";
import type { RunningService } from "../lib/running.ts";

/** What a policy sees each tick. */
export interface ControlSnapshot {
  nowMs: number;
  workers: KnownWorker[];
  /** Arrivals per second over the last tick, summed over routers. */
  arrivalsQps: number;
  /** Items waiting per model. */
  queueDepth: Record<string, number>;
  current: Plan | null;
}

/** A planning policy: snapshot in, decision out. */
export type PlanningPolicy = (snapshot: ControlSnapshot) => Promise<PlanDecision>;

/** Resource manager options. */
export interface ResourceManagerOptions {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  policyName: string;
  policy: PlanningPolicy;
  /** Models whose queue depth is read each tick. */
  models: readonly string[];
  sloMs: number;
  timeScale: number;
  tickMs: number;
  /** A worker silent this long is gone. */
  silentAfterMs: number;
  log: Logger;
  version?: string;
}

/** A running resource manager. */
export interface RunningResourceManager extends RunningService {
  readonly plans: PlanView;
  /** Runs one tick now (tests and the CLI use it). */
  tick(): Promise<Plan | null>;
}

/** Starts the resource manager. */
export async function startResourceManager(opts: ResourceManagerOptions): Promise<RunningResourceManager> {
  const { nc, subjects, log } = opts;
  const { view: plans, kv } = await PlanView.open(nc, subjects, log);
  // A restarted manager continues from the plan in KV (its epoch), not from zero.
  await plans.waitForPlan(300);
  const inventory = new WorkerInventory();
  let arrivals = 0;
  let lastTickMs = Date.now();
  let ticking: Promise<Plan | null> | null = null;
  let soon: NodeJS.Timeout | null = null;

  const beats = nc.subscribe(subjects.workerHeartbeatAll, {
    callback: (_e, m) => {
      try {
        const beat = decode(WorkerHeartbeatSchema, m.data, "heartbeat");
        const known = plans.current?.assignment[beat.workerId] !== undefined;
        inventory.observe(beat, Date.now());
        // A new worker (or one leaving) should not wait a whole tick for its assignment.
        if ((!known || beat.state === "draining") && !soon) soon = setTimeout(() => ((soon = null), void tick()), 200);
      } catch (err) {
        log.debug("manager.bad_heartbeat", { error: (err as Error).message });
      }
    },
  });
  const stats = nc.subscribe(subjects.routerStatsAll, {
    callback: (_e, m) => {
      try {
        arrivals += decode(RouterStatsSchema, m.data, "router stats").arrivals;
      } catch (err) {
        log.debug("manager.bad_stats", { error: (err as Error).message });
      }
    },
  });

  async function snapshot(): Promise<ControlSnapshot> {
    const nowMs = Date.now();
    const queueDepth: Record<string, number> = {};
    await Promise.all(
      opts.models.map(async (m) => {
        queueDepth[m] = await opts.queue.depth(m).then((d) => d.pending, () => 0);
      }),
    );
    const elapsedS = Math.max(0.001, (nowMs - lastTickMs) / 1000);
    const snap = { nowMs, workers: inventory.live(nowMs, opts.silentAfterMs), arrivalsQps: arrivals / elapsedS, queueDepth, current: plans.current };
    arrivals = 0;
    lastTickMs = nowMs;
    return snap;
  }

  async function runTick(): Promise<Plan | null> {
    const snap = await snapshot();
    const decision = await opts.policy(snap);
    const current = snap.current;
    const held: Record<string, string | null> = {};
    for (const w of snap.workers) held[w.id] = current?.assignment[w.id] ?? w.model;
    const counts = Object.fromEntries(Object.entries(decision.models).map(([m, a]) => [m, a.workers]));
    const assignment = assignWorkers(snap.workers.map((w) => w.id), held, counts);
    const plan = nextPlan({ current, decision, assignment, policy: opts.policyName, sloMs: opts.sloMs, timeScale: opts.timeScale, nowMs: snap.nowMs });
    if (!plan) return null;
    await kv.put(subjects.names.planKey, encode(plan));
    plans.offer(encode(plan));
    nc.publish(subjects.planBroadcast, encode({ v: PROTOCOL_VERSION, epoch: plan.epoch }));
    log.info("manager.plan", { epoch: plan.epoch, pair: plan.pair, models: plan.models, workers: snap.workers.length, reason: plan.reason });
    return plan;
  }

  function tick(): Promise<Plan | null> {
    // One tick at a time: a slow solve delays the next tick instead of overlapping it.
    ticking ??= runTick()
      .catch((err) => {
        log.error("manager.tick_failed", { error: (err as Error).message });
        return null;
      })
      .finally(() => (ticking = null));
    return ticking;
  }

  const timer = setInterval(() => void tick(), opts.tickMs);
  const first = setTimeout(() => void tick(), 250);
  const service = await startService(nc, {
    name: ServiceNames.resourceManager,
    version: opts.version ?? "0.1.0",
    description: `HADIS resource manager (policy ${opts.policyName})`,
    metadata: { policy: opts.policyName, protocol: String(PROTOCOL_VERSION) },
  });
  service.addEndpoint("plan", {
    subject: `${subjects.prefix}.manager.plan`,
    handler: (_err, msg) => msg.respond(encode(plans.current ?? null)),
  });
  log.info("manager.started", { policy: opts.policyName, tickMs: opts.tickMs, epoch: plans.current?.epoch ?? 0 });

  return {
    name: ServiceNames.resourceManager,
    plans,
    tick,
    async stop() {
      clearInterval(timer);
      clearTimeout(first);
      if (soon) clearTimeout(soon);
      await ticking?.catch(() => undefined);
      beats.unsubscribe();
      stats.unsubscribe();
      plans.close();
      await service.stop().catch(() => undefined);
      log.info("manager.stopped", {});
    },
  };
}
