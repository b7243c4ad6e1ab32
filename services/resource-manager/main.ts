/**
 * The resource manager: a reconciler. Each tick takes a snapshot (live workers from heartbeats,
 * demand from router reports, queue depths), runs the control tick (policy → MILP → assignment
 * → damping) and publishes a new plan epoch to KV when it adopts a change. A failing tick is
 * logged, never fatal; a restarted manager continues from the plan and epoch in KV.
 */
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, type ManagerPlanReply, type Plan, type PlanNotice } from "../../contracts/messages.ts";
import { ServiceNames, type Subjects } from "../../contracts/subjects.ts";
import { WorkerInventory } from "../../actors/control/inventory.ts";
import { ModelFailures, type ModelFailureOptions } from "../../actors/control/model-failures.ts";
import { BatchCaps } from "../../actors/control/batch-caps.ts";
import { PurgeWindows } from "../../actors/control/purge-windows.ts";
import { ArrivalRate } from "../../actors/control/arrivals.ts";
import { controlTick, newControlState, noteSwaps, type TickConfig, type TickOutcome } from "../../actors/control/reconcile.ts";
import type { Logger } from "../telemetry/log.ts";
import { onReconnect, watchConnection, type NatsConnection } from "../nats/connection.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import { startService } from "../nats/replies.ts";
import { PlanView } from "../nats/plan-view.ts";
import { OutageLog } from "./outages.ts";
import { listenToWorkersAndRouters } from "./inputs.ts";
import { NATIVE, type Fidelity } from "../../actors/artifact/mechanisms.ts";
import { allocationPeriodMs, artifactTick } from "../../actors/artifact/controller.ts";
import { LiveArtifactSignals } from "./artifact-signals.ts";
import { writePlan, type PlanWrite } from "../nats/plan-store.ts";
import { within, type RunningService } from "../lifecycle/running.ts";
import { staleBecause, type PlanResume } from "./resume.ts";

/** Resource manager options. */
export interface ResourceManagerOptions {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  /** The control tick's fixed inputs (policy, profiles, solver, SLO, time scale). */
  tick: TickConfig;
  tickMs: number;
  /** The paper artifact's mechanisms the system runs under (default none: our design); stamped on every plan, which every service follows. */
  fidelity?: Fidelity;
  /** Half-life of the demand EWMA, ms. */
  demandHalfLifeMs: number;
  /** A worker silent this long is gone. */
  silentAfterMs: number;
  /** When models failing on workers (loads, or batches in a row) bench a worker and take a model out of the pool (default 60 s, 2 workers). */
  modelFailures?: ModelFailureOptions;
  /** Items on a model without workers for this long are purged (default 5 s). */
  purgeAfterMs?: number;
  log: Logger;
  /** Called after every tick (metrics, spans), with the tick's wall time in ms; its `close` (if any) at stop. */
  onTick?: ((outcome: TickOutcome | null, error?: Error, tickMs?: number) => void) & { close?(): Promise<void> };
  version?: string;
  /**
   * The whole system starts with this manager (`npm start`, its own nats-server): nothing of the
   * stored plan's run is alive. Its demand is not taken up (nothing was served while the server was
   * down), there are no workers of it to wait for, and a fresh plan is published at once. A manager
   * restarted in a running system (the default) takes up the demand and hears the workers first.
   */
  coldStart?: boolean;
}

/** A running resource manager. */
export interface RunningResourceManager extends RunningService {
  readonly plans: PlanView;
  /** What the start made of the plan it found in the bucket. */
  readonly resumed: PlanResume;
  /** Runs one tick now (tests use it). */
  tick(): Promise<TickOutcome | null>;
}

/** Starts the resource manager. */
export async function startResourceManager(opts: ResourceManagerOptions): Promise<RunningResourceManager> {
  const { nc, subjects, log } = opts;
  const { view: plans, kv } = await PlanView.open(nc, subjects, log);
  // A restarted manager continues from the plan in KV (its epoch, demand and dwell), not from
  // zero: read, not only waited for (the watch's first entry may come after any fixed wait, and a
  // manager that started without it would publish epoch 1, which every service ignores as stale).
  try {
    const stored = await kv.get(subjects.names.planKey);
    if (stored && stored.operation === "PUT" && stored.value.length > 0) plans.offer(stored.value);
  } catch (err) {
    log.warn("manager.plan_read_failed", { error: (err as Error).message });
    await plans.waitForPlan(1_000);
  }
  // A stored plan made for another time scale, SLO, pool or policy is not built on: the next epoch
  // is planned afresh (on a cold start at once, below, so services starting with this manager
  // never follow it; otherwise once the running workers are heard).
  const found = plans.current;
  const stale = found
    ? staleBecause(found, {
        timeScale: opts.tick.timeScale,
        sloMs: opts.tick.sloMs,
        policy: opts.tick.policyName,
        models: opts.tick.profiles.pool.models,
      })
    : null;
  let setAside: Plan | null = stale ? found : null;
  const resumeFrom = !found || stale ? null : opts.coldStart ? { ...found, demandQps: 0 } : found;
  const state = newControlState(opts.demandHalfLifeMs, resumeFrom, Date.now());
  const resumed: PlanResume = !found
    ? { kind: "none" }
    : stale
      ? { kind: "fresh", storedEpoch: found.epoch, why: stale }
      : { kind: "resumed", epoch: found.epoch, policy: found.policy, timeScale: found.timeScale, demandQps: state.demand.value };
  // Every later plan starts the dwell of the workers it moves, whoever wrote it (another manager
  // on the bucket too). For this manager's own plans the tick that adopted them noted it already:
  // noting again changes nothing (a dwell starts at the later of the two times, the same here).
  let previous = plans.current;
  plans.onPlan((plan) => {
    if (previous && plan !== previous) noteSwaps(state, previous, plan);
    previous = plan;
  });
  // Registered before any timer or subscription: a registration that fails leaves nothing running.
  let registered: Awaited<ReturnType<typeof startService>> | null = null;
  try {
    registered = await startService(nc, {
      name: ServiceNames.resourceManager,
      version: opts.version ?? "0.1.0",
      description: `HADIS resource manager (policy ${opts.tick.policyName})`,
      metadata: { policy: opts.tick.policyName, protocol: String(PROTOCOL_VERSION) },
    });
    registered.addEndpoint("plan", {
      subject: subjects.managerPlan,
      handler: (_err, msg) =>
        msg.respond(encode({ plan: plans.current ?? null, demandQps: state.demand.value } satisfies ManagerPlanReply)),
    });
  } catch (err) {
    await registered?.stop().catch(() => undefined);
    plans.close();
    throw err;
  }
  const service = registered;
  // A restarted manager has heard from no worker yet: one it has not heard from is not dead until
  // it has been silent for silentAfterMs, the rule every later tick applies (workers beat every
  // second; one beat late by a GC pause must not count). Ticking before that dropped every worker
  // not yet heard from the plan, and they unloaded, to load again a tick later. A first start (no
  // plan) has nobody to drop.
  // (A system started cold has no worker of the stored plan alive: nobody to wait for.)
  let warmUntilMs = found && !opts.coldStart ? Date.now() + opts.silentAfterMs : 0;
  // A reconnect missed heartbeats as a restart does: the same wait before the next tick.
  const stopReconnectWatch = onReconnect(nc, () => {
    if (plans.current) warmUntilMs = Date.now() + opts.silentAfterMs;
  });
  const silence = new OutageLog(log, "manager.workers_silent", "manager.workers_heard_again");
  const arrivalRate = new ArrivalRate();
  const inventory = new WorkerInventory();
  const failures = new ModelFailures(opts.modelFailures);
  const batchCaps = new BatchCaps();
  const benchLog = new OutageLog(log, "manager.worker_benched", "manager.worker_unbenched");
  const unavailableLog = new OutageLog(log, "manager.model_unavailable", "manager.model_available_again");
  const models = opts.tick.profiles.pool.models;
  const fidelity = opts.fidelity ?? NATIVE;
  /** The artifact controller's once-a-second signals, when any of its mechanisms is on. */
  const artifact = fidelity.on.size > 0 ? new LiveArtifactSignals(models) : null;
  const mechanisms = [...fidelity.on];
  let ticking: Promise<TickOutcome | null> | null = null;
  let soon: NodeJS.Timeout | null = null;
  /** Set by stop(): no tick starts after it (a heartbeat during the last one scheduled one). */
  let stopped = false;

  // Heartbeats and router reports, each checked at the edge before it reaches the control state.
  const listening = listenToWorkersAndRouters({
    nc,
    subjects,
    log,
    plans,
    inventory,
    failures,
    batchCaps,
    arrivalRate,
    artifact,
    // A new worker (or one leaving, one whose model fails, a lower batch cap) should not wait a whole tick.
    tickSoon: () => {
      if (!soon) soon = setTimeout(() => ((soon = null), void tick()), 200);
    },
  });

  const purgeWindows = new PurgeWindows(opts.purgeAfterMs ?? 5_000);
  const depthOutage = new OutageLog(log, "manager.queue_depth_unread", "manager.queue_depth_read_again");
  const purgeOutage = new OutageLog(log, "manager.purge_failed", "manager.purge_works_again");
  /**
   * Items left on a model the plan has given no workers for a while belong to requests that are
   * over (routers move live ones within a second). Left there, they would read as a long queue
   * and keep the planner away from that model, so they are purged.
   */
  async function purgeAbandoned(nowMs: number, queueDepth: Record<string, number>): Promise<void> {
    const plan = plans.current;
    const idle = plan ? models.filter((m) => (plan.models[m]?.workers ?? 0) === 0) : [];
    const { ended, starting } = purgeWindows.due(idle, nowMs);
    // The stream's sequence only when a window starts (one API call, not one a tick).
    const last =
      starting.length === 0
        ? null
        : await opts.queue.lastSeq().then(
            (seq) => (purgeOutage.works("sequence"), seq),
            (err: unknown) => (
              purgeOutage.failed("sequence", { error: `work stream sequence unread, no purge window starts: ${(err as Error).message}` }),
              null
            ),
          );
    for (const { model, beforeSeq, sinceMs } of ended) {
      if ((queueDepth[model] ?? 0) === 0) continue;
      const purged = await opts.queue.purge(model, beforeSeq).then(
        (n) => (purgeOutage.works(model, { model }), n),
        (err: unknown) => (purgeOutage.failed(model, { model, error: (err as Error).message }), 0),
      );
      if (purged > 0) log.info("manager.purged", { model, purged, reason: `queued before ${nowMs - sinceMs} ms without workers` });
    }
    if (last !== null) purgeWindows.open(starting, last, nowMs);
  }

  /** The artifact's allocation (`tick`): its decision adopted at once, workers in registration order. */
  async function allocateAsArtifact(obs: Parameters<typeof controlTick>[1], demandQps: number): Promise<TickOutcome> {
    const { plan, decision, snapshot } = await artifactTick(
      {
        nowMs: obs.nowMs,
        demandQps,
        signals: artifact!.current,
        queueDepth: obs.queueDepth,
        workers: obs.workers,
        current: obs.current,
        perWorkerQueues: obs.perWorkerQueues,
      },
      {
        policyName: opts.tick.policyName,
        policy: opts.tick.policy,
        profiles: opts.tick.profiles,
        solve: opts.tick.solve,
        sloMs: opts.tick.sloMs,
        timeScale: opts.tick.timeScale,
      },
    );
    const swapped = plan
      ? obs.workers.filter((w) => (obs.current?.assignment[w.id] ?? null) !== (plan.assignment[w.id] ?? null)).map((w) => w.id)
      : [];
    return {
      plan,
      snapshot,
      decision,
      verdict: null,
      swapped,
      excluded: { models: [], workers: [] },
      ...(plan ? {} : { held: decision.reason }),
    };
  }

  /** Queue depths per model: the models' queues, and under random dispatch each worker's own queue counted for the model it holds. */
  async function depthsNow(): Promise<Record<string, number>> {
    const depth: Record<string, number> = {};
    await Promise.all(
      models.map(
        async (m) =>
          (depth[m] = await opts.queue.depth(m).then(
            (d) => d.pending,
            () => 0,
          )),
      ),
    );
    const plan = plans.current;
    if (plan && fidelity.on.has("dispatch")) {
      await Promise.all(
        Object.entries(plan.assignment).map(async ([id, m]) => {
          depth[m] =
            (depth[m] ?? 0) +
            (await opts.queue.depth({ worker: id }).then(
              (d) => d.pending,
              () => 0,
            ));
        }),
      );
    }
    return depth;
  }

  async function runTick(): Promise<TickOutcome | null> {
    const nowMs = Date.now();
    const started = performance.now();
    const queueDepth: Record<string, number> = {};
    const unread: string[] = [];
    await Promise.all(
      models.map(
        async (m) =>
          (queueDepth[m] = await opts.queue.depth(m).then(
            (d) => d.pending,
            () => (unread.push(m), 0),
          )),
      ),
    );
    if (fidelity.on.has("dispatch")) Object.assign(queueDepth, await depthsNow());
    // Read as empty meanwhile.
    if (unread.length > 0) depthOutage.failed("depths", { models: unread, readAs: 0 });
    else depthOutage.works("depths");
    const { qps: arrivalsQps, routers } = arrivalRate.sample(nowMs, opts.silentAfterMs);
    // Heartbeats the server sent before now are read first (an event loop that stalled has them
    // waiting on the socket): a worker is gone for its silence, not for this process's.
    if (watchConnection(nc).connected) await within(nc.flush(), 1_000);
    // The workers heard, and only they: with none, the plan says so (routers answer no_capacity at
    // once) rather than keep promising workers nobody hears.
    const alive = inventory.live(Date.now(), opts.silentAfterMs);
    const assigned = Object.keys(plans.current?.assignment ?? {}).length;
    if (alive.length === 0 && assigned > 0)
      silence.failed("all", {
        planned: assigned,
        reason: `no worker heard from for ${opts.silentAfterMs} ms: planning with none (requests are answered no_capacity until one is heard)`,
      });
    else if (alive.length > 0) silence.works("all", { workers: alive.length });
    // Models that failed on several workers are left out, and workers that failed alone (they idle).
    const out = failures.unavailable(
      nowMs,
      alive.map((w) => w.id),
    );
    benchLog.track(out.workers, (workerId) => (out.workers.has(workerId) ? { workerId, model: out.workers.get(workerId) } : { workerId }));
    // (A policy with fixed models plans on them whatever failed: none is out of its pool.)
    unavailableLog.track(opts.tick.fixedModels ? new Set() : out.models, (model) => ({ model }));
    const workers = alive.filter((w) => !out.workers.has(w.id)).map((w) => ({ id: w.id, model: w.model }));
    const swapsBefore = { ...state.lastSwapAtMs };
    const fresh = setAside !== null && plans.current === setAside;
    const signals = artifact?.current;
    const demandQps = signals && fidelity.on.has("demand") ? signals.demand : undefined;
    const obs = {
      nowMs,
      arrivalsQps,
      queueDepth,
      workers,
      current: fresh ? null : plans.current,
      routers,
      unavailableModels: [...out.models],
      benchedWorkers: [...out.workers.keys()],
      batchCaps: batchCaps.current(nowMs),
      ...(signals ? { signals } : {}),
      ...(demandQps !== undefined ? { demandQps } : {}),
      ...(fidelity.on.has("dispatch") ? { perWorkerQueues: true } : {}),
    };
    let outcome = fidelity.on.has("tick")
      ? await allocateAsArtifact(obs, demandQps ?? arrivalsQps)
      : await controlTick(state, obs, opts.tick);
    const plan = outcome.plan;
    if (plan && mechanisms.length > 0) plan.mechanisms = mechanisms;
    // A fresh plan still follows the set-aside one's epoch: services ignore an older epoch.
    if (plan && fresh) plan.epoch = setAside!.epoch + 1;
    if (plan && workers.length === 0)
      plan.reason = `${alive.length === 0 ? `no worker heard from for ${opts.silentAfterMs} ms` : "every worker heard is benched"}: ${plan.reason}`;
    if (plan) {
      let write: PlanWrite;
      try {
        write = await writePlan(kv, subjects.names.planKey, plan);
      } catch (err) {
        // Not published, so nobody swapped: the next tick may order the same swaps without a dwell.
        state.lastSwapAtMs = swapsBefore;
        throw err;
      }
      if (!write.written) {
        // Another manager wrote this epoch (or a later one) first: its plan is the one in force.
        state.lastSwapAtMs = swapsBefore;
        if (write.theirs) plans.adopt(write.theirs);
        const theirs = plans.current;
        const what = write.epoch >= 0 ? `another manager wrote epoch ${write.epoch}` : "another write to the plan landed first";
        log.warn("manager.plan_conflict", { epoch: plan.epoch, stored: write.epoch, reason: what });
        outcome = { ...outcome, plan: null, swapped: [], held: what, snapshot: { ...outcome.snapshot, current: theirs } };
      }
    }
    if (plan && outcome.plan) {
      if (fresh) setAside = null;
      plans.adopt(plan);
      nc.publish(subjects.planBroadcast, encode({ v: PROTOCOL_VERSION, epoch: plan.epoch } satisfies PlanNotice));
      log.info("manager.plan", {
        epoch: plan.epoch,
        pair: plan.pair,
        routerThreshold: plan.routerThreshold,
        discThreshold: plan.discThreshold,
        models: plan.models,
        swapped: outcome.swapped.length,
        demandQps: Number(outcome.snapshot.demandQps.toFixed(2)),
        workers: workers.length,
        solveMs: outcome.decision.solveMs,
        reason: plan.reason,
        damping: outcome.verdict?.reason,
      });
    } else if (!plan && outcome.held && outcome.held !== "unchanged") {
      log.info("manager.held", { reason: outcome.held, demandQps: Number(outcome.snapshot.demandQps.toFixed(2)) });
    }
    await purgeAbandoned(nowMs, queueDepth);
    observe(outcome, undefined, performance.now() - started);
    return outcome;
  }

  /** Hands a tick to `onTick`; what it throws is logged (a rejected tick would end the process). */
  function observe(outcome: TickOutcome | null, error: Error | undefined, ms: number): void {
    try {
      opts.onTick?.(outcome, error, ms);
    } catch (err) {
      log.error("manager.observer_failed", { error: (err as Error).message });
    }
  }

  function tick(): Promise<TickOutcome | null> {
    // One tick at a time: a slow solve delays the next tick instead of overlapping it.
    if (ticking) return ticking;
    if (stopped || Date.now() < warmUntilMs) return Promise.resolve(null);
    const started = performance.now();
    ticking = runTick()
      .catch((err) => {
        log.error("manager.tick_failed", { error: (err as Error).message });
        observe(null, err as Error, performance.now() - started);
        return null;
      })
      .finally(() => (ticking = null));
    return ticking;
  }

  // The artifact's controller ticks once a second (its signals) and allocates every 50 trace-seconds.
  let seconds = 0;
  const allocateEvery = Math.round(allocationPeriodMs(opts.tick.timeScale) / 1_000);
  const secondTimer = artifact
    ? setInterval(() => {
        void depthsNow().then(
          (depth) => {
            artifact.sample(depth, Date.now(), opts.silentAfterMs);
            if (fidelity.on.has("tick") && seconds++ % allocateEvery === 0) void tick();
          },
          () => undefined,
        );
      }, 1_000)
    : null;
  const timer = setInterval(() => void (fidelity.on.has("tick") ? undefined : tick()), opts.tickMs);
  // A worker of the plan gone silent is planned around now, not at the next tick (20 s at time scale 1).
  const lost = new Set<string>();
  const silenceWatch = setInterval(() => {
    const plan = plans.current;
    if (!plan || soon) return;
    const alive = new Set(inventory.live(Date.now(), opts.silentAfterMs).map((w) => w.id));
    // (Each silence once: a worker planned around, or heard again, may go silent anew later.)
    for (const id of lost) if (!(id in plan.assignment) || alive.has(id)) lost.delete(id);
    const gone = Object.keys(plan.assignment).filter((id) => !alive.has(id) && !lost.has(id));
    if (gone.length === 0) return;
    gone.forEach((id) => lost.add(id));
    soon = setTimeout(() => ((soon = null), void tick()), 0);
  }, 1_000);
  silenceWatch.unref();
  // (A little past the warm-up: a timer may fire a few ms early by the wall clock.)
  const first = setTimeout(() => void tick(), Math.max(250, warmUntilMs - Date.now() + 50));
  if (resumed.kind === "fresh")
    log.warn("manager.fresh_plan", { storedEpoch: resumed.storedEpoch, reason: `the stored plan's ${resumed.why}: planning afresh` });
  if (resumed.kind === "resumed")
    log.info("manager.resumed", {
      epoch: resumed.epoch,
      policy: resumed.policy,
      timeScale: resumed.timeScale,
      demandQps: resumed.demandQps,
    });
  // Cold, the fresh plan at once: services starting now read it, not the one set aside.
  if (setAside && opts.coldStart) await tick();
  log.info("manager.started", { policy: opts.tick.policyName, tickMs: opts.tickMs, epoch: plans.current?.epoch ?? 0 });

  return {
    name: ServiceNames.resourceManager,
    plans,
    resumed,
    tick,
    async stop() {
      stopped = true;
      stopReconnectWatch();
      clearInterval(timer);
      if (secondTimer) clearInterval(secondTimer);
      clearInterval(silenceWatch);
      clearTimeout(first);
      if (soon) clearTimeout(soon);
      listening.stop();
      await ticking?.catch(() => undefined);
      if (soon) clearTimeout(soon);
      plans.close();
      await service.stop().catch(() => undefined);
      await opts.onTick?.close?.();
      log.info("manager.stopped", {});
    },
  };
}

export type { Plan };
