/**
 * A router's ear on the workers: their heartbeats, and the refusal (`no_capacity`) for work on a
 * model none of them serves now (`actors/routing/capacity.ts` decides).
 */
import { decodeFromSender } from "../../contracts/envelope.ts";
import type { HadisError } from "../../contracts/errors.ts";
import { WorkerHeartbeatSchema, type Plan } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import { capacityRefusal, WorkerSightings } from "../../actors/routing/capacity.ts";
import { throttled, type Logger } from "../telemetry/log.ts";
import { watchConnection, type NatsConnection } from "../nats/connection.ts";

/** What the router asks of it. */
export interface CapacityWatch {
  /** The refusal for new work on `model` under `plan` now, by the plan and the heartbeats, or null (a refusal is logged, at most once a minute). */
  refusal(model: string, plan: Plan | null): HadisError | null;
  /**
   * The refusal for work already queued on `model`: by the plan alone, whose manager has given up
   * on the model's workers. A worker silent for a few seconds (a network blip) may still deliver it.
   */
  planRefusal(model: string, plan: Plan | null): HadisError | null;
  /** Heartbeats may have been missed (a reconnect): none is taken for gone until it could have beaten again. */
  listenAgain(): void;
  stop(): void;
}

/** Subscribes to every worker heartbeat; a worker silent `silentAfterMs` is gone. */
export function watchCapacity(nc: NatsConnection, subjects: Subjects, log: Logger, silentAfterMs: number): CapacityWatch {
  const sightings = new WorkerSightings(silentAfterMs, Date.now());
  const refused = throttled(log, "warn", "router.no_capacity");
  const sub = nc.subscribe(subjects.workerHeartbeatAll, {
    callback: (err, m) => {
      if (err) {
        // Refused (a role without the permission): judged from the plan alone, said once.
        sightings.deaf();
        log.error("router.heartbeats_unwatched", {
          error: err.message,
          fix: `allow this router's user to subscribe to ${subjects.workerHeartbeatAll}`,
        });
        return;
      }
      try {
        sightings.observe(
          decodeFromSender(WorkerHeartbeatSchema, m, "heartbeat", (b) => b.workerId),
          Date.now(),
        );
      } catch {
        // (A heartbeat that does not read is the resource manager's to count and report.)
      }
    },
  });
  // While the connection is down no heartbeat can come: the plan alone is judged then (and, once
  // back, nothing from heartbeats until a worker could have beaten again).
  const link = watchConnection(nc);
  const said = (model: string, err: HadisError | null) => {
    if (err) refused({ model, reason: err.message });
    return err;
  };
  return {
    refusal: (model, plan) => said(model, capacityRefusal(model, plan, link.connected ? sightings : null, Date.now())),
    planRefusal: (model, plan) => said(model, capacityRefusal(model, plan, null, Date.now())),
    listenAgain: () => sightings.listenAgain(Date.now()),
    stop: () => sub.unsubscribe(),
  };
}
