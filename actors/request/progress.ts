/**
 * A request's progress as a job reports it, read off the request machine's snapshots: routed,
 * light image made, judged, heavy generation running. Pure: the router publishes what this says.
 */
import type { AppliedOptions } from "../../contracts/messages.ts";
import type { GenerateOutcome, JudgeOutcome, RouteDecision } from "./types.ts";

/** What of a request machine snapshot progress reads: its state and the outcomes it holds. */
export interface ProgressView {
  /** The state the machine is in (`routing`, `light`, `judging`, `heavy` or `{ heavy: … }`, …). */
  value: unknown;
  context: { decision?: RouteDecision; light?: GenerateOutcome; judge?: JudgeOutcome };
}

/** Whether a machine state is the heavy stage (`heavy`, or one of its substates: `{ heavy: "racing" }` while the light model races it). */
const inHeavy = (value: unknown): boolean => value === "heavy" || (typeof value === "object" && value !== null && "heavy" in value);

/** One step of progress (a job event without its envelope). */
export type Progress =
  | { kind: "routed"; hard: boolean; pair: { light: string; heavy: string }; planEpoch: number }
  | { kind: "light_done"; model: string; execMs: number; applied?: AppliedOptions }
  | { kind: "judged"; score: number; threshold: number; accept: boolean }
  | { kind: "heavy_running"; model: string; escalated: boolean };

/** The steps of progress between two snapshots (`before` undefined: the machine's start), in the order they happened. */
export function progressBetween(before: ProgressView | undefined, after: ProgressView): Progress[] {
  const steps: Progress[] = [];
  const was = before?.context ?? {};
  const now = after.context;
  if (now.decision && !was.decision)
    steps.push({ kind: "routed", hard: now.decision.hard, pair: now.decision.pair, planEpoch: now.decision.planEpoch });
  if (now.light && !was.light)
    steps.push({
      kind: "light_done",
      model: now.light.model,
      execMs: now.light.execMs,
      ...(now.light.applied ? { applied: now.light.applied } : {}),
    });
  if (now.judge && !was.judge)
    steps.push({ kind: "judged", score: now.judge.score, threshold: now.judge.threshold, accept: now.judge.accept });
  if (inHeavy(after.value) && !inHeavy(before?.value) && now.decision) {
    steps.push({ kind: "heavy_running", model: now.decision.pair.heavy, escalated: now.light !== undefined });
  }
  return steps;
}

/**
 * The steps of one snapshot split where the heavy stage starts: a preview sent with that snapshot
 * goes between the two (after the verdict, before `heavy_running`), as a job tells them.
 */
export function splitAtHeavy(steps: Progress[]): [before: Progress[], after: Progress[]] {
  const at = steps.findIndex((step) => step.kind === "heavy_running");
  return at < 0 ? [steps, []] : [steps.slice(0, at), steps.slice(at)];
}
