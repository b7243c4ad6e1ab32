/**
 * A request reaches the router: counted for the manager's demand sample and the controller's
 * ledger, refused by the admission bound, or routed (light or heavy), with hadis-plus's
 * deadline-aware cascade choosing per request from the path ahead.
 */
import { refusal } from "../routing/admission.ts";
import { admit, rescueAtMs } from "../routing/deadline-aware.ts";
import { REPLY_MARGIN_MS } from "../request/types.ts";
import { decideRoute } from "../routing/route-policy.ts";
import { estimateMs, heavyHasRoom, isCascade, sloDeadline, type SimState } from "./sim-state.ts";
import { enqueue, finish } from "./sim-requests.ts";
import type { SimRequest } from "./types.ts";

/** Admits and routes one arriving request, or refuses it at once (no plan, or the router's admission bound). */
export function arrive(s: SimState, req: SimRequest): void {
  s.arrivalsSinceReport++;
  s.routerInFlight++;
  s.ledger.start(req.index, s.now);
  s.agenda.push(req.deadlineAtMs, { kind: "deadline", req });
  const plan = s.plan;
  // No plan, or the router's admission bound (Little's law on the plan's capacity): refused at once.
  if (!plan || (!s.drops && refusal(plan, s.routerInFlight, s.sloMs))) return finish(s, req, { latencyMs: 0, outcome: "dropped" });
  const reference = s.reference;
  const scorer = reference ? { score: () => reference.referenceScores[req.seqIndex] } : s.config.scorer;
  req.decision = decideRoute(plan, req.prompt, req.id, scorer, s.artifactThreshold ?? s.config.threshold);
  if (s.deadlineAware && isCascade(plan) && (req.decision.hard || !req.decision.skipJudge)) {
    // hadis-plus's admission: the path ahead (light, judge, heavy if rejected) against the time left.
    const { light, heavy } = req.decision.pair;
    const path = { lightMs: estimateMs(s, light), judgeMs: s.workerJudge ? 0 : s.judgeLatencyMs, heavyMs: estimateMs(s, heavy) };
    const { choice } = admit(req.decision.hard, sloDeadline(s, req) - s.now, path, heavyHasRoom(s, heavy));
    if (req.decision.hard) {
      if (choice === "light") {
        // The heavy model cannot answer in time, the light one can: its image, unjudged, degraded.
        s.result.admissions.light++;
        req.decision = { ...req.decision, hard: false, skipJudge: true };
        req.degraded = true;
      }
    } else {
      s.result.admissions[choice]++;
      if (choice === "heavy") req.decision = { ...req.decision, hard: true };
      else if (choice === "light") req.lightOnly = true;
    }
  }
  // hadis-plus: a prompt sent straight to the heavy model turns to the light one if its heavy image is late.
  if (s.deadlineAware && isCascade(plan) && req.decision.hard) {
    // (Only when that moment is ahead: a light model that cannot answer in time anyway is not asked.)
    const at = rescueAtMs(sloDeadline(s, req), estimateMs(s, req.decision.pair.light), REPLY_MARGIN_MS);
    if (at > s.now) s.agenda.push(at, { kind: "rescue", req });
  }
  // Under random dispatch every query enters at a light worker, which counts it even when its router sends it on.
  if (req.decision.hard && s.dispatch && isCascade(plan)) s.ledger.arrival(plan.pair.light);
  enqueue(s, req, req.decision.hard ? "heavy" : "light", req.decision.hard ? req.decision.pair.heavy : req.decision.pair.light);
}
