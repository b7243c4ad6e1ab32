/**
 * The resource manager service on a real nats-server (plan KV, heartbeats), with a work queue whose
 * depth reads can be made to fail: what it says when JetStream cannot answer, that an observer
 * that throws costs only a log line, how long a restarted manager waits before its first tick, and
 * that a worker whose model load failed alone sits out the plan for a while.
 */
import { describe, expect, it } from "vitest";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { decode, encode } from "../../contracts/envelope.ts";
import { PlanSchema, PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { loadProfiles } from "../../services/files/profiles.ts";
import type { Logger } from "../../services/telemetry/log.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import { DEFAULT_WORK_QUEUE, WorkQueue } from "../../services/nats/work-queue.ts";
import { openPlanBucket } from "../../services/nats/kv-buckets.ts";
import { createPolicy } from "../../services/resource-manager/policies.ts";
import { startResourceManager, type ResourceManagerOptions } from "../../services/resource-manager/main.ts";
import { writePlan } from "../../services/nats/plan-store.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { startProxy } from "../helpers/proxy.ts";
import { waitFor } from "../helpers/processes.ts";
import { connectNats } from "../../services/nats/connection.ts";

const t = useNatsServer("manager-test");
const profiles = loadProfiles();
const WORKERS = ["gpu-0", "gpu-1"];

/** A log that keeps its events. */
function recordingLog(): Logger & { events: { level: string; event: string }[]; fields: Record<string, unknown>[] } {
  const events: { level: string; event: string }[] = [];
  const fields: Record<string, unknown>[] = [];
  const at =
    (level: string) =>
    (event: string, f: Record<string, unknown> = {}) =>
      void (events.push({ level, event }), fields.push(f));
  return { events, fields, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** The value of a counter of `hadis_messages_rejected_total` in this process's metrics. */
async function rejectedCount(kind: string): Promise<number> {
  const line = (await metricsText()).split("\n").find((l) => l.startsWith(`hadis_messages_rejected_total{kind="${kind}"}`));
  return line ? Number(line.split(" ").pop()) : 0;
}

/** A work queue whose depth reads (or, with `purge`, purges) fail while `failing.on`; `pending` items on every model. */
function queue(failing: { on: boolean; purge?: boolean }, pending = 0): WorkQueue {
  return {
    depth: async () => {
      if (failing.on && !failing.purge) throw new Error("JetStream not available");
      return { pending, ackPending: 0 };
    },
    purge: async () => {
      if (failing.on && failing.purge) throw new Error("JetStream not available");
      return pending;
    },
    lastSeq: async () => 0,
  } as unknown as WorkQueue;
}

function options(
  prefix: string,
  log: Logger,
  failing: { on: boolean; purge?: boolean },
  over: Partial<ResourceManagerOptions> = {},
): ResourceManagerOptions {
  return {
    nc: t.nc,
    subjects: buildSubjects(prefix),
    queue: queue(failing),
    tick: {
      policyName: "static",
      policy: createPolicy("static", profiles),
      profiles,
      solve: async () => {
        throw new Error("the static policy solves nothing");
      },
      sloMs: 6_000,
      timeScale: 0.1,
      queueSafety: 1.5,
      admissionHeadroom: 0.8,
    },
    // Ticks only when a test asks.
    tickMs: 3_600_000,
    demandHalfLifeMs: 1_000,
    silentAfterMs: 3_000,
    log,
    ...over,
  };
}

/** Heartbeats of idle workers, as the worker service sends them (`over` changes some workers' fields). */
function beat(prefix: string, over: Record<string, Record<string, unknown>> = {}, only: readonly string[] = WORKERS): void {
  const s = buildSubjects(prefix);
  for (const workerId of only) {
    t.nc.publish(
      s.workerHeartbeat(workerId),
      encode({
        v: PROTOCOL_VERSION,
        workerId,
        backend: "profile",
        model: null,
        state: "idle",
        batchSize: 1,
        inFlight: 0,
        servedTotal: 0,
        swapsTotal: 0,
        planEpoch: 0,
        sentAtMs: Date.now(),
        ...over[workerId],
      }),
    );
  }
}

/** The workers beat, then the manager ticks three times while `failing.on` and twice after. */
async function ticksThroughOutage(manager: { tick(): Promise<unknown> }, prefix: string, failing: { on: boolean }): Promise<void> {
  beat(prefix);
  await t.nc.flush();
  for (let i = 0; i < 3; i++) await manager.tick();
  failing.on = false;
  for (let i = 0; i < 2; i++) await manager.tick();
}

describe("resource manager service", () => {
  it("says once that queue depths cannot be read, and once that they can again", async () => {
    const log = recordingLog();
    const failing = { on: true };
    const manager = await startResourceManager(options("mgr-depth", log, failing));
    try {
      await ticksThroughOutage(manager, "mgr-depth", failing);
      const said = log.events.filter((e) => e.event.startsWith("manager.queue_depth"));
      expect(said).toEqual([
        { level: "warn", event: "manager.queue_depth_unread" },
        { level: "info", event: "manager.queue_depth_read_again" },
      ]);
      // The ticks still planned (the depths read as empty meanwhile).
      expect(manager.plans.current?.epoch).toBeGreaterThanOrEqual(1);
    } finally {
      await manager.stop();
    }
  });

  it("says once per model that purges fail, and once that they work again", async () => {
    const log = recordingLog();
    const failing = { on: true, purge: true };
    // Items on every model; those the plan gives no workers are purged at once (purgeAfterMs 0).
    const manager = await startResourceManager(options("mgr-purge", log, failing, { queue: queue(failing, 2), purgeAfterMs: 0 }));
    try {
      await ticksThroughOutage(manager, "mgr-purge", failing);
      const unserved = profiles.models.map((m) => m.name).filter((m) => !(manager.plans.current!.models[m]?.workers > 0));
      expect(unserved.length).toBeGreaterThan(0);
      const said = (event: string) => log.events.filter((e) => e.event === event).length;
      expect(said("manager.purge_failed")).toBe(unserved.length);
      expect(said("manager.purge_works_again")).toBe(unserved.length);
      expect(said("manager.purged")).toBe(unserved.length * 2);
    } finally {
      await manager.stop();
    }
  });

  it("logs an observer that throws instead of failing the tick", async () => {
    const log = recordingLog();
    const manager = await startResourceManager(
      options(
        "mgr-observer",
        log,
        { on: false },
        {
          onTick: () => {
            throw new Error("observer bug");
          },
        },
      ),
    );
    try {
      beat("mgr-observer");
      await t.nc.flush();
      const outcome = await manager.tick();
      expect(outcome).not.toBeNull();
      expect(log.events).toContainEqual({ level: "error", event: "manager.observer_failed" });
      expect(log.events.some((e) => e.event === "manager.tick_failed")).toBe(false);
    } finally {
      await manager.stop();
    }
  });

  it("benches a worker whose model load failed alone: out of the plan until the window passes, then planned again", async () => {
    const log = recordingLog();
    const manager = await startResourceManager(options("mgr-bench", log, { on: false }, { modelFailures: { benchMs: 1_500 } }));
    const workersOfPlan = () => Object.keys(manager.plans.current!.assignment).sort();
    try {
      beat("mgr-bench");
      await t.nc.flush();
      await manager.tick();
      expect(workersOfPlan()).toEqual(WORKERS);
      const model = manager.plans.current!.assignment["gpu-1"];
      beat("mgr-bench", { "gpu-1": { state: "failed", failedModel: model, lastError: `load ${model}: out of memory` } });
      await t.nc.flush();
      const benched = await manager.tick();
      // One worker's failure says nothing of the model: the worker is left out, the model stays.
      expect(workersOfPlan()).toEqual(["gpu-0"]);
      expect(benched?.excluded).toEqual({ models: [], workers: ["gpu-1"] });
      expect(manager.plans.current!.reason).not.toContain("failing on workers");
      expect(log.events).toContainEqual({ level: "warn", event: "manager.worker_benched" });
      await new Promise((r) => setTimeout(r, 1_600));
      beat("mgr-bench");
      await t.nc.flush();
      await manager.tick();
      expect(workersOfPlan()).toEqual(WORKERS);
      expect(log.events).toContainEqual({ level: "info", event: "manager.worker_unbenched" });
    } finally {
      await manager.stop();
    }
  });

  it("plans no batch of a model above the cap its workers report, without waiting for the next tick", async () => {
    const manager = await startResourceManager(options("mgr-cap", recordingLog(), { on: false }));
    try {
      beat("mgr-cap");
      await t.nc.flush();
      await manager.tick();
      const model = manager.plans.current!.assignment["gpu-0"];
      const before = manager.plans.current!;
      expect(before.models[model].batchSize).toBeGreaterThan(1); // the static configuration's batch
      // The tick the first (unknown) workers' beats scheduled has run and changed nothing.
      await new Promise((r) => setTimeout(r, 400));
      expect(manager.plans.current!.epoch).toBe(before.epoch);
      beat("mgr-cap", { "gpu-0": { model, state: "serving", batchSize: 1, batchCap: 1 } });
      // No tick is due for an hour: the cap brings one within a fraction of a second.
      const deadline = Date.now() + 3_000;
      while (manager.plans.current!.epoch === before.epoch && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const after = manager.plans.current!;
      expect(after.epoch).toBe(before.epoch + 1);
      expect(after.reason).toContain(`batches ${model} ≤ 1 (workers' caps)`);
      expect(after.models[model].batchSize).toBe(1);
      expect(after.assignment).toEqual(before.assignment);
      // The same cap again lowers nothing: no tick, no new plan.
      beat("mgr-cap", { "gpu-0": { model, state: "serving", batchSize: 1, batchCap: 1 } });
      await new Promise((r) => setTimeout(r, 400));
      expect(manager.plans.current!.epoch).toBe(after.epoch);
    } finally {
      await manager.stop();
    }
  });

  it("refuses control messages that would poison planning (a rate from a 1e-320 ms interval, a sender other than its subject): counted, logged once, demand and workers untouched", async () => {
    const log = recordingLog();
    const manager = await startResourceManager(options("mgr-bad", log, { on: false }));
    const s = buildSubjects("mgr-bad");
    const report = (subjectId: string, over: Record<string, unknown>) =>
      t.nc.publish(
        s.routerStats(subjectId),
        encode({ v: PROTOCOL_VERSION, routerId: subjectId, arrivals: 5, intervalMs: 1_000, inFlight: 0, sentAtMs: Date.now(), ...over }),
      );
    try {
      beat("mgr-bad");
      await t.nc.flush();
      await manager.tick();
      const [stats0, beats0] = [await rejectedCount("router_stats"), await rejectedCount("heartbeat")];
      report("r1", { arrivals: 1, intervalMs: 1e-320 }); // 1 ÷ 1e-323 s: Infinity, then NaN for good
      report("r1", { arrivals: 0, intervalMs: 5e-324 });
      report("r1", { arrivals: 2 ** 53 - 1 });
      report("r2", { routerId: "r1" });
      report("r1", { routerId: "" });
      t.nc.publish(
        s.workerHeartbeat("gpu-0"),
        encode({
          v: PROTOCOL_VERSION,
          workerId: "ghost",
          backend: "profile",
          model: null,
          state: "idle",
          batchSize: 1,
          inFlight: 0,
          servedTotal: 0,
          swapsTotal: 0,
          planEpoch: 0,
          sentAtMs: Date.now(),
        }),
      );
      report("r1", {}); // a good one: 5 a second
      await t.nc.flush();
      const deadline = Date.now() + 3_000;
      while ((await rejectedCount("router_stats")) - stats0 < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect((await rejectedCount("router_stats")) - stats0).toBe(5);
      expect((await rejectedCount("heartbeat")) - beats0).toBe(1);
      const out = (await manager.tick())!;
      expect(out.snapshot.demandQps).toBeGreaterThan(0);
      expect(out.snapshot.demandQps).toBeLessThanOrEqual(5);
      expect(Object.keys(manager.plans.current!.assignment).sort()).toEqual(WORKERS);
      // One warning for the five bad reports (the rest counted in the next, a minute on), one for the heartbeat.
      const warned = log.events
        .map((e, i) => ({ ...log.fields[i], ...e }) as { level: string; event: string; error?: unknown })
        .filter((e) => e.level === "warn" && e.event.startsWith("manager.bad_"));
      expect(warned.map((e) => e.event).sort()).toEqual(["manager.bad_heartbeat", "manager.bad_stats"]);
      expect(warned.find((e) => e.event === "manager.bad_heartbeat")!.error).toMatch(/sent as "ghost" on the subject of "gpu-0"/);
    } finally {
      await manager.stop();
    }
  });

  it("does not write a plan its own schema refuses (every service would reject it and keep the old epoch for good)", async () => {
    const log = recordingLog();
    const manager = await startResourceManager(options("mgr-nan", log, { on: false }));
    try {
      beat("mgr-nan");
      await t.nc.flush();
      await manager.tick();
      const good = manager.plans.current!;
      const kv = await openPlanBucket(t.nc, buildSubjects("mgr-nan"));
      await expect(writePlan(kv, "current", { ...good, epoch: good.epoch + 1, demandQps: Number.NaN })).rejects.toThrow(
        /^not writing epoch \d+: plan: demandQps: /,
      );
      expect(decode(PlanSchema, (await kv.get("current"))!.value, "plan").epoch).toBe(good.epoch);
      expect(await writePlan(kv, "current", { ...good, epoch: good.epoch + 1 })).toEqual({ written: true });
      // A write that comes second gets the plan in force as a plan, for the manager to adopt as it is.
      expect(await writePlan(kv, "current", { ...good, epoch: good.epoch + 1, reason: "late" })).toEqual({
        written: false,
        epoch: good.epoch + 1,
        theirs: { ...good, epoch: good.epoch + 1 },
      });
    } finally {
      await manager.stop();
    }
  });

  it("purges from a model without workers only what has sat there a whole window (a request queued since is kept until it has)", async () => {
    const s = buildSubjects("mgr-window");
    const work = await WorkQueue.open(t.nc, s, { ...DEFAULT_WORK_QUEUE, storage: "memory" });
    const log = recordingLog();
    const manager = await startResourceManager(options("mgr-window", log, { on: false }, { queue: work, purgeAfterMs: 0 }));
    try {
      beat("mgr-window");
      await t.nc.flush();
      await manager.tick();
      const idle = profiles.pool.models.find((m) => (manager.plans.current!.models[m]?.workers ?? 0) === 0)!;
      const pending = async () => (await work.depth(idle)).pending;
      // Left by requests long over; the next tick opens the window that holds them.
      for (let i = 0; i < 2; i++) await work.publish(idle, new Uint8Array([i]), `old-${i}`);
      await manager.tick();
      // Queued since (a live request with nowhere else to go): not in that window.
      await work.publish(idle, new Uint8Array([9]), "new-0");
      await manager.tick();
      expect(await pending()).toBe(1);
      // A window later, it has sat there long enough too.
      await manager.tick();
      expect(await pending()).toBe(0);
      expect(log.events.filter((e) => e.event === "manager.purged")).toHaveLength(2);
    } finally {
      await manager.stop();
    }
  });

  it("two managers on one bucket never write the same epoch: the one that loses takes the other's plan", async () => {
    const logs = [recordingLog(), recordingLog()];
    const managers = await Promise.all(logs.map((log) => startResourceManager(options("mgr-two", log, { on: false }))));
    try {
      beat("mgr-two");
      await t.nc.flush();
      // Both plan epoch 1 from nothing, at once: one writes it.
      const outcomes = await Promise.all(managers.map((m) => m.tick()));
      expect(outcomes.filter((o) => o?.plan).length).toBe(1);
      const lost = outcomes.find((o) => !o?.plan)!;
      expect(lost.held).toBe("another manager wrote epoch 1");
      expect(lost.snapshot.current?.epoch).toBe(1); // its metrics report the plan in force
      expect(logs.flatMap((l) => l.events).filter((e) => e.event === "manager.plan_conflict")).toHaveLength(1);
      // The loser holds the winner's plan, and a later tick of either changes nothing.
      const [a, b] = managers.map((m) => m.plans.current!);
      expect(b).toEqual(a);
      beat("mgr-two");
      await t.nc.flush();
      expect((await Promise.all(managers.map((m) => m.tick()))).map((o) => o?.held)).toEqual(["unchanged", "unchanged"]);
      // The bucket's history has each epoch once.
      const kv = await openPlanBucket(t.nc, buildSubjects("mgr-two"));
      const epochs: number[] = [];
      for await (const e of await kv.history({ key: "current" }))
        if (e.operation === "PUT") epochs.push(decode(PlanSchema, e.value, "plan").epoch);
      expect(epochs).toEqual([1]);
    } finally {
      await Promise.all(managers.map((m) => m.stop()));
    }
  });

  it("a restarted manager does not tick before a worker could have been silent for silentAfterMs", async () => {
    const first = await startResourceManager(options("mgr-restart", recordingLog(), { on: false }, { silentAfterMs: 2_000 }));
    beat("mgr-restart");
    await t.nc.flush();
    await first.tick();
    expect(first.plans.current).not.toBeNull();
    await first.stop();

    const restarted = await startResourceManager(options("mgr-restart", recordingLog(), { on: false }, { silentAfterMs: 2_000 }));
    // Its warm-up started at the end of its start-up: this is no earlier.
    const ready = Date.now();
    try {
      expect(restarted.plans.current?.epoch).toBe(first.plans.current!.epoch);
      // Past half the silence limit (what it waited before): no tick yet.
      await new Promise((r) => setTimeout(r, Math.max(0, ready + 1_400 - Date.now())));
      expect(await restarted.tick()).toBeNull();
      await new Promise((r) => setTimeout(r, Math.max(0, ready + 2_100 - Date.now())));
      beat("mgr-restart");
      await t.nc.flush();
      expect(await restarted.tick()).not.toBeNull();
    } finally {
      await restarted.stop();
    }
  });

  it("hears no worker at all: plans with none, saying so in the plan and once in the log, and plans the workers again once heard", async () => {
    const log = recordingLog();
    const manager = await startResourceManager(
      options("mgr-deaf", log, { on: false }, { silentAfterMs: 500, queue: queue({ on: false }, 7) }),
    );
    try {
      beat("mgr-deaf");
      await t.nc.flush();
      await manager.tick();
      const planned = manager.plans.current!;
      expect(Object.keys(planned.assignment).sort()).toEqual(WORKERS);
      await new Promise((r) => setTimeout(r, 700)); // every worker silent past silentAfterMs
      await manager.tick();
      await manager.tick();
      // (Its once-a-second watch for silent workers may have planned it first: the plan is what counts.)
      const none = manager.plans.current!;
      expect(none.epoch).toBe(planned.epoch + 1);
      expect(none.assignment).toEqual({});
      expect(Object.values(none.models).every((a) => a.workers === 0)).toBe(true);
      expect(none.reason).toMatch(/^no worker heard from for 500 ms: /);
      expect(log.events.filter((e) => e.event === "manager.workers_silent")).toEqual([{ level: "warn", event: "manager.workers_silent" }]);
      beat("mgr-deaf");
      await t.nc.flush();
      await manager.tick();
      expect(Object.keys(manager.plans.current!.assignment).sort()).toEqual(WORKERS);
      expect(log.events.filter((e) => e.event === "manager.workers_heard_again")).toHaveLength(1);
    } finally {
      await manager.stop();
    }
  });

  it("plans around a worker gone silent within a second or two, without waiting for its next tick", async () => {
    const manager = await startResourceManager(options("mgr-lost", recordingLog(), { on: false }, { silentAfterMs: 1_000 }));
    try {
      beat("mgr-lost");
      await t.nc.flush();
      await manager.tick();
      expect(Object.keys(manager.plans.current!.assignment).sort()).toEqual(WORKERS);
      const started = Date.now();
      // One worker keeps beating, the other is gone; the manager's next tick is an hour away.
      const keep = setInterval(() => beat("mgr-lost", {}, [WORKERS[0]]), 200);
      try {
        await waitFor(() => !(WORKERS[1] in manager.plans.current!.assignment), 5_000, "the silent worker planned around");
      } finally {
        clearInterval(keep);
      }
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(Object.keys(manager.plans.current!.assignment)).toEqual([WORKERS[0]]);
    } finally {
      await manager.stop();
    }
  });

  it("after its connection comes back, waits as a restarted one does: a worker not yet heard from again is not dropped", async () => {
    const proxy = await startProxy(t.server.port);
    const nc = await connectNats(proxy.url, "manager-behind-proxy");
    const manager = await startResourceManager({
      ...options("mgr-reconnect", recordingLog(), { on: false }, { silentAfterMs: 2_000 }),
      nc,
    });
    try {
      await nc.flush(); // its heartbeat subscription has reached the server
      // Ticks until both workers are planned (an automatic first tick may run before the beats came through the proxy).
      await waitFor(
        async () => {
          beat("mgr-reconnect");
          await t.nc.flush();
          await new Promise((r) => setTimeout(r, 100));
          await manager.tick();
          return Object.keys(manager.plans.current?.assignment ?? {}).length === WORKERS.length;
        },
        10_000,
        "both workers planned",
      );
      const planned = manager.plans.current!;
      expect(Object.keys(planned.assignment).sort()).toEqual(WORKERS);
      const reconnected = (async () => {
        for await (const s of nc.status()) if (s.type === "reconnect") return;
      })();
      proxy.cut(3_000); // longer than the silence limit
      await reconnected;
      await nc.flush(); // its subscriptions are back on the server
      // Back, having missed both workers' beats for 3 s (past the limit); the first to beat again is heard, the other not yet.
      beat("mgr-reconnect", {}, [WORKERS[0]]);
      await t.nc.flush();
      await nc.flush(); // (the server sends the beat to the manager before this flush's answer)
      expect(await manager.tick()).toBeNull();
      expect(manager.plans.current!.epoch).toBe(planned.epoch);
    } finally {
      await manager.stop();
      await nc.close();
      await proxy.close();
    }
  });
});
