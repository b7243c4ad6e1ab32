/**
 * What the resource manager hears: worker heartbeats (the inventory, model failures, batch caps)
 * and router load reports (demand, and the artifact controller's signals). Each is decoded and
 * checked against its schema and its subject's sender before it reaches the control state; one
 * that fails is counted (`hadis_messages_rejected_total`) and logged at most once a minute.
 */
import { decodeFromSender } from "../../contracts/envelope.ts";
import { asHadisError } from "../../contracts/errors.ts";
import { RouterStatsSchema, WorkerHeartbeatSchema } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import type { ArrivalRate } from "../../actors/control/arrivals.ts";
import type { BatchCaps } from "../../actors/control/batch-caps.ts";
import type { WorkerInventory } from "../../actors/control/inventory.ts";
import type { ModelFailures } from "../../actors/control/model-failures.ts";
import { throttled, type Logger } from "../telemetry/log.ts";
import { recordRejected } from "../telemetry/metrics.ts";
import type { NatsConnection } from "../nats/connection.ts";
import type { PlanView } from "../nats/plan-view.ts";
import type { LiveArtifactSignals } from "./artifact-signals.ts";

/** What the listeners feed and whom they tell. */
export interface ManagerInputs {
  nc: NatsConnection;
  subjects: Subjects;
  log: Logger;
  plans: PlanView;
  inventory: WorkerInventory;
  failures: ModelFailures;
  batchCaps: BatchCaps;
  arrivalRate: ArrivalRate;
  /** The artifact controller's once-a-second signals, when any of its mechanisms is on. */
  artifact: LiveArtifactSignals | null;
  /** Asks for a tick soon: a heartbeat changed what the plan should be. */
  tickSoon(): void;
}

/** Subscribes to heartbeats and router reports; `stop` unsubscribes. */
export function listenToWorkersAndRouters(o: ManagerInputs): { stop(): void } {
  const { nc, subjects, log, plans, inventory, failures, batchCaps, arrivalRate, artifact } = o;
  /**
   * A heartbeat or router report, or null when it does not decode, fails its schema or names
   * another sender than its subject does (it would add a worker or router nobody runs): counted,
   * and logged at most once a minute.
   */
  const received =
    <T>(
      kind: "heartbeat" | "router_stats",
      read: (m: { subject: string; data: Uint8Array }) => T,
      warn: (fields: Record<string, unknown>) => void,
    ) =>
    (m: { subject: string; data: Uint8Array }): T | null => {
      try {
        return read(m);
      } catch (err) {
        recordRejected(kind);
        warn({ subject: m.subject, error: asHadisError(err).message });
        return null;
      }
    };
  const heartbeatFailed = throttled(log, "error", "manager.heartbeat_failed");
  const heartbeatOf = received(
    "heartbeat",
    (m) => decodeFromSender(WorkerHeartbeatSchema, m, "heartbeat", (b) => b.workerId),
    throttled(log, "warn", "manager.bad_heartbeat"),
  );
  const reportOf = received(
    "router_stats",
    (m) => decodeFromSender(RouterStatsSchema, m, "router stats", (r) => r.routerId),
    throttled(log, "warn", "manager.bad_stats"),
  );

  const beats = nc.subscribe(subjects.workerHeartbeatAll, {
    callback: (err, m) => {
      // Refused (a role without the permission): every worker would read as gone. Said once.
      if (err)
        return void log.error("manager.heartbeats_unwatched", {
          error: err.message,
          fix: `allow this manager's user to subscribe to ${subjects.workerHeartbeatAll}`,
        });
      const beat = heartbeatOf(m);
      if (!beat) return;
      try {
        const nowMs = Date.now();
        inventory.observe(beat, nowMs);
        const failing = failures.observe(beat, nowMs);
        const capped = batchCaps.observe(beat, nowMs);
        // (A worker left out of the plan for its failures is known too.)
        const known = plans.current?.assignment[beat.workerId] !== undefined || failures.failedLately(beat.workerId, nowMs) !== undefined;
        // A new worker (or one leaving, one whose model fails, a lower batch cap) should not wait a whole tick.
        if (!known || beat.state === "draining" || failing || capped) o.tickSoon();
      } catch (err) {
        heartbeatFailed({ workerId: beat.workerId, error: (err as Error).message });
      }
    },
  });
  const stats = nc.subscribe(subjects.routerStatsAll, {
    callback: (_e, m) => {
      const report = reportOf(m);
      if (report) arrivalRate.report(report.routerId, report.arrivals, report.intervalMs, Date.now());
      if (report && artifact) artifact.report(report, Date.now());
    },
  });

  return {
    stop() {
      beats.unsubscribe();
      stats.unsubscribe();
    },
  };
}
