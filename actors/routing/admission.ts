/**
 * Admission control, the last step of the degradation ladder. By Little's law a router whose
 * share of the plan's capacity is C qps can hold about C × deadline requests that will still
 * finish in time; beyond that a new request cannot meet its deadline, so it is refused at once
 * with a retry-after hint instead of queueing without bound.
 */
import { HadisError } from "../../contracts/errors.ts";
import type { Plan } from "../../contracts/messages.ts";

/**
 * Requests this router may hold in flight for a request with `deadlineMs` (Infinity = no bound).
 * Only the degraded plan (light-only, the ladder's second step) bounds admission: before that,
 * the planner answers more load with cheaper configurations, not refusals.
 */
export function admissionLimit(plan: Plan | null, deadlineMs: number): number {
  if (!plan?.admission || !plan.capacityQps || !plan.degraded) return Number.POSITIVE_INFINITY;
  const share = plan.capacityQps / plan.admission.routers;
  return Math.max(1, Math.floor(share * (deadlineMs / 1000) * plan.admission.headroom));
}

/** The refusal for a request that would be number `inFlight` on this router, or null to admit it. */
export function refusal(plan: Plan | null, inFlight: number, deadlineMs: number): HadisError | null {
  const limit = admissionLimit(plan, deadlineMs);
  if (inFlight <= limit) return null;
  return new HadisError(
    "overloaded",
    `${inFlight - 1} requests in flight on this router; at ${plan!.capacityQps} qps capacity a new one would not finish within ${deadlineMs} ms`,
    { retryAfterMs: Math.round(Math.min(deadlineMs, plan!.sloMs) / 2) },
  );
}
