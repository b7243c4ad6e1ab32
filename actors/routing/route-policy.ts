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
export function decideRoute(plan: Plan, prompt: string, requestId: string, scorer: DifficultyScorer, threshold: HardnessThreshold): RouteDecision {
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
