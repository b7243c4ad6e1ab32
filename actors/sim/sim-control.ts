/**
 * The control side of a run: the router's stats reports, the manager's control tick
 * (`controlTick`: policy → MILP → assignment → damping), and the controller's second (its ledger
 * row and, under the artifact's `tick`, the artifact's allocation every 50 trace-seconds).
 */
import { artifactTick } from "../artifact/controller.ts";
import { controlTick } from "../control/reconcile.ts";
import { adopt } from "./sim-plans.ts";
import { queueDepth, type SimState } from "./sim-state.ts";

/** The router's stats report: the arrivals since its last one, for the manager's demand sample. */
export function reportArrivals(s: SimState): void {
  s.arrivalRate.report("sim-router", s.arrivalsSinceReport, s.now - s.lastReportMs, s.now);
  s.arrivalsSinceReport = 0;
  s.lastReportMs = s.now;
}

/** The demand a planner sees: arrivals per second (our design), or the artifact's in-flight signal. */
const plannedDemand = (s: SimState): number | undefined =>
  s.config.demandOracle?.(s.now) ?? (s.on("demand") ? s.ledger.signals.demand : undefined);

/** The manager's control tick on what it observes now (workers as of their last heartbeat); a new plan is adopted. */
export async function runTick(s: SimState): Promise<void> {
  s.result.ticks++;
  const { qps: arrivalsQps, routers } = s.arrivalRate.sample(s.now, s.routerSilentAfterMs);
  const inventory = s.workers.map((w) => ({ id: w.id, model: s.heartbeatEveryMs > 0 ? w.reported : w.model }));
  const obs = {
    nowMs: s.now,
    arrivalsQps,
    queueDepth: queueDepth(s),
    workers: inventory,
    current: s.plan,
    routers,
    demandQps: plannedDemand(s),
    signals: s.ledger.signals,
    perWorkerQueues: s.dispatch,
  };
  const outcome = await (s.config.control ?? controlTick)(s.control, obs, s.tick);
  s.config.onTick?.(outcome, s.now);
  if (outcome.plan) adopt(s, outcome.plan, outcome.swapped.length, outcome.snapshot.demandQps);
}

/** The controller's second: its ledger row, and under the artifact's `tick` an allocation every 50 trace-seconds. */
export async function runSecond(s: SimState): Promise<void> {
  const signals = s.ledger.tick(s.now, queueDepth(s), null);
  if (s.artifactControl && s.seconds % s.allocateEvery === 0) {
    s.result.ticks++;
    const demandQps = plannedDemand(s) ?? s.arrivalRate.sample(s.now, s.routerSilentAfterMs).qps;
    const inventory = s.workers.map((w) => ({ id: w.id, model: w.desired }));
    const { plan: next } = await artifactTick(
      { nowMs: s.now, demandQps, signals, queueDepth: queueDepth(s), workers: inventory, current: s.plan, perWorkerQueues: s.dispatch },
      {
        policyName: s.config.policyName,
        policy: s.policy,
        profiles: s.planning,
        solve: s.config.solve,
        sloMs: s.sloMs,
        timeScale: s.timeScale,
      },
    );
    if (next) adopt(s, next, s.workers.filter((w) => w.desired !== null && next.assignment[w.id] !== w.desired).length, demandQps);
  }
  s.seconds++;
  const row = s.ledger.rows[s.ledger.rows.length - 1];
  if (s.configSource && row && row.atMs === s.now && s.plan)
    row.configFid = s.plan.degraded ? s.worstFid : (s.plan.expectedFid ?? s.worstFid);
}
