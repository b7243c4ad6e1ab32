/**
 * `hadis start` says when the plan's models are loaded. Until then a request is accepted and
 * queued but waits for a worker to load its model (14 s for sd3.5-large at time scale 1): the
 * banner alone read as "ready" to a first user whose first image then took twice as long.
 */
import type { Plan, WorkerHeartbeat } from "../../contracts/messages.ts";
import { WorkerStates } from "../../contracts/messages.ts";
import type { RunningSystem } from "../system.ts";

/** One model of the plan: its workers that hold it loaded, of those the plan gives it. */
export interface ModelLoad {
  model: string;
  loaded: number;
  planned: number;
}

/**
 * How far the plan's models are loaded: per model, the workers the plan assigns it that hold it
 * and are not loading, unloading or failed. `ready` once every model has one: every route can
 * then be served.
 */
export function planLoad(
  plan: Plan,
  workers: readonly Pick<WorkerHeartbeat, "workerId" | "model" | "state">[],
): { ready: boolean; models: ModelLoad[] } {
  const byId = new Map(workers.map((w) => [w.workerId, w]));
  const models = Object.entries(plan.models)
    .filter(([, allocation]) => allocation.workers > 0)
    .map(([model, allocation]) => {
      const assigned = Object.entries(plan.assignment)
        .filter(([, m]) => m === model)
        .map(([id]) => byId.get(id));
      const loaded = assigned.filter(
        (w) => w?.model === model && (w.state === WorkerStates.serving || w.state === WorkerStates.idle),
      ).length;
      return { model, loaded, planned: allocation.workers };
    });
  return { ready: models.length > 0 && models.every((m) => m.loaded > 0), models };
}

/** "sd35-medium on 1 of 1 worker, sd35-large on 15 of 15 workers". */
export function describeLoad(models: readonly ModelLoad[]): string {
  return models.map((m) => `${m.model} on ${m.loaded} of ${m.planned} worker${m.planned === 1 ? "" : "s"}`).join(", ");
}

/**
 * Watches an embedded system's own workers (every `everyMs`; workers joined from elsewhere are not
 * seen) until the plan in force has each of its
 * models loaded on a worker, then calls `ready` once. Returns a stop function; the timer does not
 * keep the process alive.
 */
export function whenModelsLoaded(system: RunningSystem, ready: (load: ModelLoad[]) => void, everyMs = 250): () => void {
  const check = (): boolean => {
    const plan = system.routers[0]?.plans.current;
    const agents = system.workers?.agents;
    if (!plan || !agents) return false;
    const load = planLoad(
      plan,
      agents.map((a) => a.status("")),
    );
    if (load.ready) ready(load.models);
    return load.ready;
  };
  if (check()) return () => undefined;
  const timer = setInterval(() => check() && clearInterval(timer), everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
