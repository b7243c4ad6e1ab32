/** Where queued work goes when a new plan leaves its model without workers. */
import type { Plan } from "../../contracts/messages.ts";

/**
 * The model that should take work of `stage` now queued for `model`, or null if `model` still
 * has workers under the plan (or no model playing that stage has any).
 */
export function moveTarget(plan: Plan, stage: "light" | "heavy", model: string): string | null {
  const served = (m: string) => (plan.models[m]?.workers ?? 0) > 0;
  if (served(model)) return null;
  const to = stage === "light" ? plan.pair.light : plan.pair.heavy;
  return to !== model && served(to) ? to : null;
}
