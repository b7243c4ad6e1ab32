/** What the resource manager reports after each tick: Prometheus metrics and a tick span. */
import type { TickOutcome } from "../../actors/control/reconcile.ts";
import { ServiceNames } from "../../contracts/subjects.ts";
import { recordDemand, recordExcluded, recordPlan, recordQueueDepths, recordSolve } from "../telemetry/metrics.ts";
import { endWithError, ServiceTelemetry } from "../telemetry/tracing.ts";
import type { NatsConnection } from "../nats/connection.ts";

/** An `onTick` callback; `close` lets its tracing go when the manager has stopped. */
export type TickObserver = ((outcome: TickOutcome | null, error?: Error, tickMs?: number) => void) & { close(): Promise<void> };

/** An `onTick` callback recording metrics and one span per tick. */
export function tickObserver(nc: NatsConnection): TickObserver {
  const telemetry = new ServiceTelemetry(ServiceNames.resourceManager, nc);
  const observe = (outcome: TickOutcome | null, error?: Error, tickMs?: number): void => {
    if (outcome) {
      recordDemand(outcome.snapshot.demandQps);
      if (outcome.decision.solveMs !== undefined) recordSolve(outcome.decision.solveMs);
      recordQueueDepths(outcome.snapshot.queueDepth);
      // (The manager reads every pool model's queue: its keys are the pool.)
      recordExcluded(Object.keys(outcome.snapshot.queueDepth), outcome.excluded);
      // Swaps are counted by the workers when they happen, not when ordered. The plan in force,
      // new or kept: a restarted manager that keeps the stored plan still reports it.
      const plan = outcome.plan ?? outcome.snapshot.current;
      if (plan) recordPlan(plan);
    }
    if (!telemetry.on) return;
    const span = telemetry.tracer.startSpan("tick", {
      startTime: Date.now() - (tickMs ?? 0),
      attributes: {
        "hadis.demand_qps": outcome?.snapshot.demandQps ?? 0,
        "hadis.workers": outcome?.snapshot.workers.length ?? 0,
        "hadis.solve_ms": outcome?.decision.solveMs ?? 0,
        "hadis.solver_status": outcome?.decision.solverStatus ?? "",
        "hadis.plan_epoch": outcome?.plan?.epoch ?? outcome?.snapshot.current?.epoch ?? 0,
        "hadis.plan_changed": outcome?.plan !== null && outcome !== null,
        "hadis.pair": outcome ? `${outcome.decision.pair.light}→${outcome.decision.pair.heavy}` : "",
        "hadis.swaps_ordered": outcome?.swapped.length ?? 0,
        "hadis.held": outcome?.held ?? "",
        "hadis.models_unavailable": outcome?.excluded.models ?? [],
        "hadis.workers_benched": outcome?.excluded.workers.length ?? 0,
      },
    });
    // A failed tick (the snapshot or the solve threw) is an error span, as a failed request is.
    if (error) {
      span.setAttribute("error.message", error.message);
      endWithError(span, error);
    } else span.end();
  };
  return Object.assign(observe, { close: () => telemetry.close() });
}
