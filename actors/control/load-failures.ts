/**
 * Failed model loads, from heartbeats: what the resource manager plans around. A model that
 * failed to load on `modelAfterWorkers` live workers (or on every live worker, when fewer) is out
 * of the pool until `benchMs` after the last report of its failure; each time it fails again
 * after coming back, twice as long (up to `maxBackoff` times), until a worker loads it. The
 * model is broken, not the workers: they are planned at once for other models. A worker whose
 * failure the others do not share (a GPU short of memory for what fits on the rest) is benched
 * instead: left out of the plan, so it idles, until `benchMs` after its last failure.
 */
import type { WorkerHeartbeat } from "../../contracts/messages.ts";

/** When failures bench a worker and take a model out of the pool. */
export interface LoadFailureOptions {
  /** How long a benched worker and (the first time) a failed model stay out after their last failure, ms (default 60 s). */
  benchMs?: number;
  /** Live workers a model must have failed on to leave the pool (default 2). */
  modelAfterWorkers?: number;
  /** Longest time out of the pool, as a multiple of `benchMs` (default 16). */
  maxBackoff?: number;
}

/** What failed loads take out of planning now. */
export interface Unavailable {
  /** Workers benched (not planned for), with the model each failed to load. */
  workers: Map<string, string>;
  /** Models out of the pool. */
  models: Set<string>;
}

/** Heartbeats in; benched workers and unavailable models out. */
export class LoadFailures {
  /** Worker → its last failed load. */
  private readonly last = new Map<string, { model: string; atMs: number }>();
  /** Models out of the pool: until when, and how many times in a row they went out. */
  private readonly out = new Map<string, { untilMs: number; strikes: number }>();
  /** Strikes of models back in the pool that no worker has loaded since. */
  private readonly strikes = new Map<string, number>();
  private readonly benchMs: number;
  private readonly modelAfterWorkers: number;
  private readonly maxBackoff: number;

  constructor(options: LoadFailureOptions = {}) {
    this.benchMs = options.benchMs ?? 60_000;
    this.modelAfterWorkers = Math.max(1, options.modelAfterWorkers ?? 2);
    this.maxBackoff = Math.max(1, options.maxBackoff ?? 16);
  }

  /**
   * Records a heartbeat received at `nowMs`. A failed load (re)starts the worker's window, and
   * extends its model's time out when the model is out; a worker serving a model has loaded it
   * (its earlier failure is over, and that model's strikes are forgiven).
   */
  observe(beat: WorkerHeartbeat, nowMs: number): void {
    if (beat.state === "failed" && beat.failedModel) {
      this.last.set(beat.workerId, { model: beat.failedModel, atMs: nowMs });
      const out = this.out.get(beat.failedModel);
      if (out) out.untilMs = Math.max(out.untilMs, nowMs + this.backoffMs(out.strikes));
    } else if (beat.state === "serving" && beat.model) {
      this.last.delete(beat.workerId);
      this.strikes.delete(beat.model);
    }
  }

  /** Whether `workerId` reported a failed load within the window (benched, or failing on a model that is out). */
  failedLately(workerId: string, nowMs: number): boolean {
    const f = this.last.get(workerId);
    return f !== undefined && nowMs - f.atMs < this.benchMs;
  }

  /** Unavailable models and benched workers at `nowMs`, among the workers alive now (benched ones included). */
  unavailable(nowMs: number, live: readonly string[]): Unavailable {
    for (const [id, f] of this.last) if (nowMs - f.atMs >= this.benchMs) this.last.delete(id);
    for (const [model, o] of this.out) {
      if (o.untilMs > nowMs) continue;
      this.out.delete(model);
      this.strikes.set(model, o.strikes);
    }
    const failedOn = new Map<string, { workers: number; lastMs: number }>();
    for (const id of live) {
      const f = this.last.get(id);
      if (!f) continue;
      const n = failedOn.get(f.model) ?? { workers: 0, lastMs: 0 };
      failedOn.set(f.model, { workers: n.workers + 1, lastMs: Math.max(n.lastMs, f.atMs) });
    }
    const needed = Math.max(1, Math.min(this.modelAfterWorkers, live.length));
    for (const [model, n] of failedOn) {
      if (n.workers < needed || this.out.has(model)) continue;
      const strikes = (this.strikes.get(model) ?? 0) + 1;
      this.out.set(model, { untilMs: n.lastMs + this.backoffMs(strikes), strikes });
    }
    const workers = new Map<string, string>();
    for (const id of live) {
      const f = this.last.get(id);
      if (f && !this.out.has(f.model)) workers.set(id, f.model);
    }
    return { workers, models: new Set(this.out.keys()) };
  }

  private backoffMs(strikes: number): number {
    return this.benchMs * Math.min(this.maxBackoff, 2 ** Math.max(0, strikes - 1));
  }
}
