/** Turns a request's outcome into the `hadis.generate` reply, or the typed error to send. */
import { HadisError } from "../../contracts/errors.ts";
import { Fallbacks, Routes, MAX_DEADLINE_MS, PROTOCOL_VERSION, type Fallback, type GenerateReply } from "../../contracts/messages.ts";
import { NO_TIME_TO_JUDGE, type PreviewEvent, type RequestOutcome } from "./types.ts";

/** The reply for a served request; throws the request's error otherwise. */
export function buildReply(outcome: RequestOutcome, requestId: string, seed: number): GenerateReply {
  if (!outcome.ok) {
    if (outcome.error instanceof HadisError) throw outcome.error;
    throw new HadisError("internal", outcome.error instanceof Error ? outcome.error.message : String(outcome.error), { requestId });
  }
  const { image, decision, judge } = outcome;
  const fallback = fallbackOf(outcome);
  return {
    v: PROTOCOL_VERSION,
    requestId,
    image: image.image,
    imageFormat: "png",
    width: image.width,
    height: image.height,
    seed,
    route: outcome.route,
    models: outcome.models,
    servedBy: image.model,
    difficulty: decision.difficulty,
    routerThreshold: decision.routerThreshold,
    ...(judge ? { score: judge.score, threshold: judge.threshold } : {}),
    planEpoch: decision.planEpoch,
    timings: outcome.timings,
    ...(fallback ? { fallback } : {}),
    ...(image.applied ? { applied: image.applied } : {}),
    ...(decision.admission ? { admission: decision.admission } : {}),
  };
}

/**
 * The preview message of a request that asked for one: the light image the judge rejected, as a
 * reply of its own (route `light`, its score under the threshold) marked `final: false`.
 */
export function buildPreview(preview: PreviewEvent, requestId: string, seed: number): GenerateReply {
  return { ...buildReply(preview.outcome, requestId, seed), final: false };
}

/**
 * The reply as sent to its caller: marked `final: true` when the caller asked for a preview (it
 * reads messages until that one), left as it is otherwise (one reply, as ever).
 */
export function finalReply(reply: GenerateReply, previewAsked: boolean): GenerateReply {
  return previewAsked ? { ...reply, final: true } : reply;
}

/** Why a served request's image is not the one the cascade meant (`Fallbacks`); undefined when it is. */
export function fallbackOf(outcome: Extract<RequestOutcome, { ok: true }>): Fallback | undefined {
  if (outcome.heavyLate) return Fallbacks.heavyLate;
  if (outcome.heavyError !== undefined) return Fallbacks.heavyFailed;
  if (outcome.escalationSkipped) return Fallbacks.noTimeForHeavy;
  if (outcome.judgeError === NO_TIME_TO_JUDGE) return Fallbacks.noTimeToJudge;
  if (outcome.judgeError !== undefined) return Fallbacks.judgeFailed;
  // Moved by the router to the model that plays the heavy stage now (`moveTarget`).
  if (outcome.route !== Routes.light && outcome.image.model !== outcome.decision.pair.heavy) return Fallbacks.heavyMoved;
  return undefined;
}

/** How an answered request counts: served with an image, in the SLO's denominator, violating it. */
export interface SloOutcome {
  served: boolean;
  /** In the SLO's denominator: accepted requests given at least the SLO's time (bad input refused at the edge counts in no SLO). */
  answered: boolean;
  /** Failed, or served after the SLO. */
  violated: boolean;
}

/**
 * The SLO count of a request that ended with `reply` (null: an error) after being `accepted` or
 * not, given `deadlineMs` (its own, or the SLO's when it gave none). A retry answered with its
 * first attempt's reply counts nowhere: that attempt was counted (its timings are the reply's;
 * counted again, a late first attempt would be two violations). A request whose caller gave it
 * less time than the SLO is served or not, but in no SLO figure: the SLO was not asked of the
 * system (a caller's 50 ms deadline expiring read as a violation, a few such callers as a missed SLO).
 */
export function sloOutcome(reply: GenerateReply | null, accepted: boolean, sloMs: number, deadlineMs?: number): SloOutcome {
  if (reply?.deduplicated) return { served: false, answered: false, violated: false };
  const asked = deadlineMs === undefined || deadlineMs >= Math.min(sloMs, MAX_DEADLINE_MS);
  if (reply) return { served: true, answered: asked, violated: asked && reply.timings.totalMs > sloMs };
  return { served: false, answered: accepted && asked, violated: accepted && asked };
}
