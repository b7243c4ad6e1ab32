/**
 * The reconciler's last step: name the workers for a decision (moving as few as possible)
 * and issue a new plan epoch only when something changed.
 */
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import type { PlanDecision } from "./decision.ts";

/**
 * Names a model for each live worker so that each model gets its count, moving the fewest:
 * a worker keeps its model while that model still needs workers; the rest fill the gaps.
 */
export function assignWorkers(
  workerIds: readonly string[],
  current: Readonly<Record<string, string | null | undefined>>,
  counts: Readonly<Record<string, number>>,
): Record<string, string> {
  const need = new Map(Object.entries(counts).filter(([, n]) => n > 0));
  const out: Record<string, string> = {};
  const free: string[] = [];
  for (const id of [...workerIds].sort()) {
    const m = current[id];
    const left = m ? need.get(m) ?? 0 : 0;
    if (m && left > 0) {
      out[id] = m;
      need.set(m, left - 1);
    } else free.push(id);
  }
  for (const [model, left] of [...need.entries()].sort()) {
    for (let i = 0; i < left && free.length > 0; i++) out[free.shift()!] = model;
  }
  return out;
}

/** Workers whose model differs between two assignments (newly named workers do not count). */
export function countSwaps(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): number {
  let n = 0;
  for (const [id, m] of Object.entries(after)) if (before[id] !== undefined && before[id] !== m) n++;
  return n;
}

/** Inputs of `nextPlan`. */
export interface NextPlanInput {
  current: Plan | null;
  decision: PlanDecision;
  assignment: Record<string, string>;
  policy: string;
  sloMs: number;
  timeScale: number;
  nowMs: number;
}

function sameShape(a: Plan, b: Omit<Plan, "epoch" | "issuedAtMs" | "reason" | "v">): boolean {
  return JSON.stringify([a.policy, a.pair, a.routerThreshold, a.discThreshold, a.models, sortKeys(a.assignment), a.sloMs, a.degraded ?? 0]) ===
    JSON.stringify([b.policy, b.pair, b.routerThreshold, b.discThreshold, b.models, sortKeys(b.assignment), b.sloMs, b.degraded ?? 0]);
}

function sortKeys(r: Record<string, string>): [string, string][] {
  return Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1));
}

/** The plan to publish, or null when the decision changes nothing in force. */
export function nextPlan(input: NextPlanInput): Plan | null {
  const { decision } = input;
  const body = {
    policy: input.policy,
    sloMs: input.sloMs,
    timeScale: input.timeScale,
    pair: decision.pair,
    routerThreshold: decision.routerThreshold,
    discThreshold: decision.discThreshold,
    heavyShare: decision.heavyShare,
    ...(decision.expectedFid !== undefined ? { expectedFid: decision.expectedFid } : {}),
    models: Object.fromEntries(Object.entries(decision.models).sort(([a], [b]) => (a < b ? -1 : 1))),
    assignment: input.assignment,
    degraded: decision.degraded,
  };
  if (input.current && sameShape(input.current, body)) return null;
  return { v: PROTOCOL_VERSION, epoch: (input.current?.epoch ?? 0) + 1, issuedAtMs: input.nowMs, reason: decision.reason, ...body };
}
