/**
 * What a starting resource manager makes of the plan it finds in the bucket: a plan of the same
 * system (time scale, SLO, pool, policy) is resumed; one made for another is set aside, and the
 * manager plans afresh from the workers it hears, under the next epoch (services ignore older
 * ones). Resumed unchanged, a plan made at time scale 0.01 for a start at 0.1 had every worker
 * warned to change a flag the operator had set right.
 */
import type { Plan } from "../../contracts/messages.ts";

/** What the manager plans for now. */
export interface PlanningFor {
  timeScale: number;
  sloMs: number;
  policy: string;
  /** Model names of the profile pool. */
  models: readonly string[];
}

/** What a start did with the stored plan: none found, resumed, or set aside for a fresh plan (and why). */
export type PlanResume =
  | { kind: "none" }
  | { kind: "resumed"; epoch: number; policy: string; timeScale: number; demandQps: number }
  | { kind: "fresh"; storedEpoch: number; why: string };

/** Why `stored` is not a plan to resume for `now`, or null when it is. */
export function staleBecause(stored: Plan, now: PlanningFor): string | null {
  const why: string[] = [];
  if (stored.timeScale !== now.timeScale) why.push(`time scale ${stored.timeScale}, not ${now.timeScale}`);
  else if (stored.sloMs !== now.sloMs) why.push(`SLO ${stored.sloMs} ms, not ${now.sloMs}`);
  if (stored.policy !== now.policy) why.push(`policy ${stored.policy}, not ${now.policy}`);
  const unknown = [...new Set([stored.pair.light, stored.pair.heavy, ...Object.keys(stored.models)])].filter(
    (m) => !now.models.includes(m),
  );
  if (unknown.length > 0) why.push(`model${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} not in the pool`);
  return why.length > 0 ? `epoch ${stored.epoch} was made for ${why.join("; ")}` : null;
}

/** One line for an operator: what the start resumed, or why it planned afresh. */
export function describeResume(r: PlanResume): string | null {
  if (r.kind === "resumed")
    return `resumed plan epoch ${r.epoch} (policy ${r.policy}, time scale ${r.timeScale}, demand estimate ${Number(r.demandQps.toFixed(2))} qps)`;
  if (r.kind === "fresh") return `a fresh plan: the stored ${r.why}`;
  return null;
}
