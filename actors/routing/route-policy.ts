/** The routing decision for one prompt under the plan in force. */
import type { Plan } from "../../contracts/messages.ts";
import type { RouteDecision } from "../request/types.ts";
import { unitDraw } from "../profile/stats.ts";
import type { DifficultyScorer, HardnessThreshold } from "./difficulty.ts";

/**
 * Scores the prompt and decides light or heavy under `plan`. In `random` mode (a mix of
 * models without cascade) the share goes to the heavy model by a hash of the request id; otherwise
 * the same hash breaks ties among scores at the threshold.
 */
export function decideRoute(
  plan: Plan,
  prompt: string,
  requestId: string,
  scorer: DifficultyScorer,
  threshold: HardnessThreshold,
): RouteDecision {
  if (plan.routerMode === "workers") return byWorkers(plan, requestId);
  const difficulty = scorer.score(prompt, plan.pair);
  threshold.observe?.(difficulty);
  const single = plan.pair.light === plan.pair.heavy;
  // A stable draw per request: the share in random mode, the tie-break at the cut otherwise.
  const draw = unitDraw(requestId);
  const hard = plan.routerMode === "random" ? draw < plan.routerThreshold : threshold.isHard(difficulty, plan.routerThreshold, draw);
  return {
    hard: !single && hard,
    difficulty,
    routerThreshold: plan.routerThreshold,
    pair: plan.pair,
    skipJudge: single || plan.discThreshold <= 0,
    planEpoch: plan.epoch,
  };
}

/**
 * `workers` mode (the artifact's Proteus: every worker an equal share of the traffic): one of the
 * plan's models with probability in proportion to its workers, by a stable draw per request;
 * served by it alone, unjudged.
 */
function byWorkers(plan: Plan, requestId: string): RouteDecision {
  const models = Object.entries(plan.models).filter(([, a]) => a.workers > 0);
  const total = models.reduce((s, [, a]) => s + a.workers, 0);
  let draw = unitDraw(requestId) * total;
  const target = models.find(([, a]) => (draw -= a.workers) < 0)?.[0] ?? models.at(-1)?.[0] ?? plan.pair.light;
  return { hard: false, difficulty: 0, routerThreshold: 0, pair: { light: target, heavy: target }, skipJudge: true, planEpoch: plan.epoch };
}
