/**
 * A request's deadlines as its machine takes them: its own, and under the artifact's drops the
 * 1.5 × SLO its work carries, with no deadline-aware path (no escalation check, no race, no light
 * image as the deadline nears), except under hadis-plus's plans, whose path is their own and runs
 * against the SLO (the simulator's `sloDeadline`).
 */
import type { RequestInput } from "./request-machine.ts";

/** The artifact's drops, as the router's intake sets them for a request. */
export interface ArtifactDrops {
  /** What the request's work carries: 1.5 × SLO from its arrival (or its own deadline, if sooner). */
  workDeadlineAtMs: number;
  /** Its arrival plus the SLO. */
  sloDeadlineAtMs: number;
}

/** The machine's deadline fields for a request received at `receivedAtMs` with `deadlineMs`. */
export function requestDeadlines(o: {
  receivedAtMs: number;
  deadlineMs: number;
  floorMs: (model: string) => number;
  drops?: ArtifactDrops;
  /** The plan in force is hadis-plus's (its deadline-aware path). */
  deadlineAware: boolean;
}): Pick<RequestInput, "deadlineAtMs" | "workDeadlineAtMs" | "floorMs" | "lightFallback"> {
  const deadlineAtMs = o.receivedAtMs + o.deadlineMs;
  if (!o.drops) return { deadlineAtMs, floorMs: o.floorMs };
  if (!o.deadlineAware) return { deadlineAtMs, workDeadlineAtMs: o.drops.workDeadlineAtMs, lightFallback: false };
  return { deadlineAtMs: Math.min(deadlineAtMs, o.drops.sloDeadlineAtMs), workDeadlineAtMs: o.drops.workDeadlineAtMs, floorMs: o.floorMs };
}
