/**
 * hadis-plus's deadline-aware cascade: per request, from the path ahead of it (queue wait from the
 * live depth, batch latency, judge), whether the light stage is worth running and whether a
 * rejected light image can still be remade by the heavy model in time. Pure: estimates in, choices out.
 */
import type { Admission, AdmissionChoice } from "../../contracts/admission.ts";
import type { Plan } from "../../contracts/messages.ts";
import type { RouteDecision } from "../request/types.ts";

export type { Admission, AdmissionChoice };

/** Whether plans of `policy` run the deadline-aware cascade: hadis-plus's, and the simulator's bound that plans as it does. */
export const isDeadlineAware = (policy: string): boolean => policy === "hadis-plus" || policy === "clairvoyant";

/** How long a generation of one model would take if queued now, ms: the batches ahead of it, then its own. */
export function stageEstimateMs(queued: number, workers: number, batchSize: number, batchLatencyMs: number): number {
  if (workers <= 0) return Number.POSITIVE_INFINITY;
  const perRound = workers * Math.max(1, batchSize);
  return (Math.floor(Math.max(0, queued) / perRound) + 1) * batchLatencyMs;
}

/** The path a request would take from now. */
export interface PathEstimate {
  /** Light generation, queue included, ms. */
  lightMs: number;
  /** Judging, ms. */
  judgeMs: number;
  /** Heavy generation, queue included, ms. */
  heavyMs: number;
}

/** The admission's choice for a light-routed request with `leftMs` to its deadline. */
export function admissionChoice(leftMs: number, path: PathEstimate, heavyHasRoom: boolean): AdmissionChoice {
  if (path.lightMs + path.judgeMs + path.heavyMs <= leftMs) return "cascade";
  if (path.heavyMs <= leftMs && heavyHasRoom) return "heavy";
  return "light";
}

/** Whether a rejected light image can be remade by the heavy model before the deadline. */
export function escalationFits(leftMs: number, heavyMs: number): boolean {
  return heavyMs <= leftMs;
}

/**
 * For a prompt the router sends straight to the heavy model: the light model instead, served
 * without judging (degraded), when the heavy model cannot answer in the time left and the light one can.
 */
export function hardFallsBackToLight(leftMs: number, path: Pick<PathEstimate, "lightMs" | "heavyMs">): boolean {
  return path.heavyMs > leftMs && path.lightMs <= leftMs;
}

/**
 * For a prompt on its way to the heavy model with no light image: the last moment the light model
 * can still answer before the deadline (its path ahead, then the reply's margin). If the heavy
 * image has not come by then, the light model races it (its image served `heavy_late`, degraded,
 * if it comes first) rather than let the deadline pass: the admission's estimate of the heavy
 * path was a prediction, this keeps its promise.
 */
export function rescueAtMs(deadlineAtMs: number, lightMs: number, marginMs: number): number {
  return deadlineAtMs - lightMs - marginMs;
}

/** An estimate for a stage no worker serves (ms): finite, so that it travels in msgpack, JSON and traces alike. */
export const UNSERVED_MS = 86_400_000;

/**
 * The admission of a request the router routed (`hard`: straight to the heavy model) under a
 * cascade plan: a hard prompt stays on the heavy model unless only the light one can answer in
 * time ("light": served unjudged, degraded); a light-routed one takes `admissionChoice`.
 */
export function admit(hard: boolean, leftMs: number, path: PathEstimate, heavyHasRoom: boolean): Admission {
  const finite = (ms: number) => Math.round(Math.min(ms, UNSERVED_MS));
  const choice: AdmissionChoice = hard
    ? hardFallsBackToLight(leftMs, path)
      ? "light"
      : "heavy"
    : admissionChoice(leftMs, path, heavyHasRoom);
  return { choice, leftMs: finite(leftMs), lightMs: finite(path.lightMs), judgeMs: finite(path.judgeMs), heavyMs: finite(path.heavyMs) };
}

/**
 * A routing decision as its admission leaves it: a light-routed prompt sent straight to the heavy
 * model ("heavy"), a hard prompt sent to the light model unjudged ("light"), otherwise as routed;
 * the admission rides along (the request machine reads "light" as: serve the light image).
 */
export function admitted(decision: RouteDecision, admission: Admission): RouteDecision {
  if (!decision.hard && admission.choice === "heavy") return { ...decision, hard: true, admission };
  if (decision.hard && admission.choice === "light") return { ...decision, hard: false, skipJudge: true, admission };
  return { ...decision, admission };
}

/** The path ahead of a request under a plan, as the router sees it. */
export interface PathView {
  /** A generation of `model` queued now: the rounds of batches ahead of it, then its own, ms. */
  stageMs(model: string): number;
  /** Whether `model` has no backlog beyond one round of its batches. */
  hasRoom(model: string): boolean;
  /** A verdict, ms. */
  judgeMs: number;
}

/**
 * Items of a model queued, not running: all that wait on it less one round of its batches (the
 * simulator's queue depth leaves those out; counted as queued, they doubled the estimate under load).
 */
export function queuedBeyondRunning(waiting: number, workers: number, batchSize: number): number {
  return Math.max(0, waiting - workers * batchSize);
}

/**
 * A routed decision under `plan` as hadis-plus's admission leaves it: admitted (`admit`) when the
 * plan is a deadline-aware cascade, the time left is known and the caller pinned no model (and
 * the light image would be judged, or the prompt went hard); as routed otherwise. `path` is read
 * only when the admission applies.
 */
export function admitRouted(
  plan: Pick<Plan, "policy" | "pair">,
  decision: RouteDecision,
  leftMs: number | undefined,
  pinned: boolean,
  path: () => PathView,
): RouteDecision {
  if (leftMs === undefined || pinned || !isDeadlineAware(plan.policy) || plan.pair.light === plan.pair.heavy) return decision;
  if (!decision.hard && decision.skipJudge) return decision;
  const view = path();
  const { light, heavy } = decision.pair;
  const estimate = { lightMs: view.stageMs(light), judgeMs: view.judgeMs, heavyMs: view.stageMs(heavy) };
  return admitted(decision, admit(decision.hard, leftMs, estimate, view.hasRoom(heavy)));
}
