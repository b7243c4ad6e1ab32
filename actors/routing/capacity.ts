/**
 * Capacity as a router knows it: which models have a worker now. A request sent to a model no
 * worker serves would wait out its deadline in the queue; told at once (`no_capacity` with a
 * retry hint), its caller can retry or go elsewhere. Two sources: the plan in force (a model it
 * gives no worker), and the workers' heartbeats (a model no worker heard lately holds or is
 * loading), which know of a dead worker before the next plan does.
 */
import { HadisError } from "../../contracts/errors.ts";
import type { Plan, WorkerHeartbeat } from "../../contracts/messages.ts";

/** How long a caller refused for want of workers is told to wait: a worker heard again is planned within a tick, then loads its model. */
export const NO_WORKER_RETRY_MS = 5_000;

/**
 * The workers a router has heard from lately, by heartbeat (every second from each worker). One
 * silent for `silentAfterMs` is gone, the resource manager's rule. Until the router has listened
 * that long (since its start, or a reconnect that may have lost heartbeats) it judges nothing.
 */
export class WorkerSightings {
  private readonly workers = new Map<string, { model: string | null; heardAtMs: number }>();
  private listeningSinceMs: number;

  constructor(
    readonly silentAfterMs: number,
    nowMs: number,
  ) {
    this.listeningSinceMs = nowMs;
  }

  /** Records a heartbeat received at `nowMs`; a draining worker is leaving and is forgotten. */
  observe(beat: Pick<WorkerHeartbeat, "workerId" | "model" | "state">, nowMs: number): void {
    if (beat.state === "draining") this.workers.delete(beat.workerId);
    else this.workers.set(beat.workerId, { model: beat.model, heardAtMs: nowMs });
  }

  /** Heartbeats may have been missed from `nowMs` back (a reconnect): judge again only after listening `silentAfterMs`. */
  listenAgain(nowMs: number): void {
    this.listeningSinceMs = nowMs;
  }

  /** Heartbeats cannot be heard at all (the subscription was refused): judge nothing from them, ever. */
  deaf(): void {
    this.listeningSinceMs = Number.POSITIVE_INFINITY;
  }

  /** Whether it has listened long enough to tell a silent worker from one not heard yet. */
  knows(nowMs: number): boolean {
    return nowMs - this.listeningSinceMs >= this.silentAfterMs;
  }

  /** Ids of the workers heard within `silentAfterMs`; older ones are forgotten. */
  live(nowMs: number): string[] {
    for (const [id, w] of this.workers) if (nowMs - w.heardAtMs > this.silentAfterMs) this.workers.delete(id);
    return [...this.workers.keys()];
  }

  /** How many live workers hold `model` or are given it by `plan` (loading it, say). */
  serving(model: string, plan: Plan | null, nowMs: number): number {
    let n = 0;
    for (const id of this.live(nowMs)) if (this.workers.get(id)!.model === model || plan?.assignment[id] === model) n++;
    return n;
  }
}

/**
 * The refusal for work on `model` now, or null when a worker may take it: the plan in force gives
 * the model no worker, or (once the router has listened long enough) no worker heard lately holds
 * it or is given it.
 */
export function capacityRefusal(model: string, plan: Plan | null, sightings: WorkerSightings | null, nowMs: number): HadisError | null {
  const details = { retryAfterMs: NO_WORKER_RETRY_MS, model };
  if (plan && (plan.models[model]?.workers ?? 0) === 0) {
    const none = Object.values(plan.models).every((a) => a.workers === 0);
    return new HadisError(
      "no_capacity",
      none
        ? `no worker is serving: the plan in force (epoch ${plan.epoch}) has none (${plan.reason})`
        : `no worker serves ${model}: the plan in force (epoch ${plan.epoch}) gives it none (${plan.reason})`,
      details,
    );
  }
  if (sightings?.knows(nowMs) && sightings.serving(model, plan, nowMs) === 0) {
    const heard = sightings.live(nowMs).length;
    return new HadisError(
      "no_capacity",
      `no worker of ${model} heard from for ${sightings.silentAfterMs} ms (${heard === 0 ? "no worker heard at all" : `${heard} worker${heard === 1 ? "" : "s"} heard, none holding it`})`,
      details,
    );
  }
  return null;
}
