/**
 * hadis-plus's view of the path ahead of a request, for its admission and its escalation check
 * (`actors/routing/deadline-aware.ts` decides): the generations this router waits on per model,
 * times the routers the plan counts (each router sees only its own: an even share is assumed), the
 * plan's workers and batch size for the model, and the fastest recent generation of the model (and
 * of the judge) as its batch latency. What waits includes what is running: one round of the plan's
 * batches is taken as running and left out, as the simulator's queue depth leaves it out (counted
 * as queued, it doubled the estimate under load: a 120 s live run sent 802 of 1,864 admitted
 * requests straight to the heavy model, the simulator 3 of 10,080 on the whole trace).
 */
import type { Plan } from "../../contracts/messages.ts";
import { queuedBeyondRunning, stageEstimateMs, type PathView } from "../../actors/routing/deadline-aware.ts";
import { GenerationFloor } from "../../actors/routing/generation-floor.ts";
import type { PendingWork } from "./pending.ts";

/** The path estimate of one router. */
export interface PathEstimator {
  /** The path ahead under `plan` now (what waits is counted once, here). */
  view(plan: Plan): PathView;
  observeJudge(ms: number): void;
}

/** The estimator over a router's waiting work and the generation times it has seen. */
export function pathEstimator(pending: PendingWork, floor: GenerationFloor): PathEstimator {
  const judge = new GenerationFloor();
  return {
    view(plan) {
      const waiting = pending.waitingByModel();
      const routers = Math.max(1, plan.admission?.routers ?? 1);
      const queued = (model: string) => {
        const a = plan.models[model];
        return queuedBeyondRunning((waiting.get(model) ?? 0) * routers, a?.workers ?? 0, a?.batchSize ?? 1);
      };
      return {
        stageMs(model) {
          const a = plan.models[model];
          return stageEstimateMs(queued(model), a?.workers ?? 0, a?.batchSize ?? 1, floor.floorMs(model));
        },
        hasRoom(model) {
          const a = plan.models[model];
          return a !== undefined && queued(model) < a.workers * a.batchSize;
        },
        judgeMs: judge.floorMs("judge"),
      };
    },
    observeJudge: (ms) => judge.observe("judge", ms),
  };
}
