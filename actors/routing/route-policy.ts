/** The routing decision for one prompt under the plan in force. */
import type { Plan } from "../../contracts/messages.ts";
import type { RouteDecision } from "../request/types.ts";
import type { DifficultyScorer, HardnessThreshold } from "./difficulty.ts";

/** Scores the prompt and decides light or heavy under `plan`. */
export function decideRoute(plan: Plan, prompt: string, scorer: DifficultyScorer, threshold: HardnessThreshold): RouteDecision {
  const difficulty = scorer.score(prompt);
  threshold.observe?.(difficulty);
  const single = plan.pair.light === plan.pair.heavy;
  return {
    hard: !single && threshold.isHard(difficulty, plan.routerThreshold),
    difficulty,
    routerThreshold: plan.routerThreshold,
    pair: plan.pair,
    skipJudge: single || plan.discThreshold <= 0,
    planEpoch: plan.epoch,
  };
}
