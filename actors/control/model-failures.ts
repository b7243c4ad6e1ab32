/**
 * Models that fail on workers, from heartbeats: what the resource manager plans around. A worker
 * reports a model it could not load, or the loaded model whose batches failed several times in a
 * row (`failedModel`). A model that failed on `modelAfterWorkers` live workers (or on every live
 * worker, when fewer) while no live worker serves it (has it loaded; makes images with it, once
 * its batches have failed somewhere) is out of the pool until `benchMs` after the
 * last report of its failure; each time it goes out again before a worker has served anything
 * with it, twice as long (up to `maxBackoff` times). The model is broken, not the workers: they
 * are planned at once for other models. A worker whose failure is its own (a GPU short of memory
 * for a model the others run) is benched instead: left out of the plan, so it idles, until
 * `benchMs` after its last failure, and twice as long each time it fails again before it has
 * served anything. Serving means images made: a model that loads and then fails every batch has
 * not been shown to work by loading.
 */
import type { WorkerHeartbeat } from "../../contracts/messages.ts";

/** When failures bench a worker and take a model out of the pool. */
export interface ModelFailureOptions {
  /** How long a worker is benched, and a model out of the pool, after its last failure the first time, ms (default 60 s). */
  benchMs?: number;
  /** Live workers a model must have failed on to leave the pool (default 2). */
  modelAfterWorkers?: number;
  /** Longest bench or time out of the pool, as a multiple of `benchMs` (default 16). */
  maxBackoff?: number;
}

/** What failures take out of planning now. */
export interface Unavailable {
  /** Workers benched (not planned for), with the model each failed on. */
  workers: Map<string, string>;
  /** Models out of the pool. */
  models: Set<string>;
}

/** A worker's last failure: the model, when it was reported, and how long it counts. */
interface Failure {
  model: string;
  /** It failed to run (its batches), not to load: the worker had it loaded. */
  ran: boolean;
  atMs: number;
  forMs: number;
}

/** Heartbeats in; benched workers and unavailable models out. */
export class ModelFailures {
  private readonly last = new Map<string, Failure>();
  /** Benches of each worker since it last served a model. */
  private readonly benches = new Map<string, number>();
  /**
   * The model each worker serves, by its last heartbeat: its count of served items when it began
   * to (or when it last reported anything else), and whether it has made images with it since.
   */
  private readonly serving = new Map<string, { model: string; servedBefore: number; made: boolean }>();
  /** Models out of the pool: until when, and how many times in a row they went out. */
  private readonly out = new Map<string, { untilMs: number; strikes: number }>();
  /** Strikes of models back in the pool that no worker has loaded since. */
  private readonly strikes = new Map<string, number>();
  private readonly benchMs: number;
  private readonly modelAfterWorkers: number;
  private readonly maxBackoff: number;

  constructor(options: ModelFailureOptions = {}) {
    this.benchMs = options.benchMs ?? 60_000;
    this.modelAfterWorkers = Math.max(1, options.modelAfterWorkers ?? 2);
    this.maxBackoff = Math.max(1, options.maxBackoff ?? 16);
  }

  /**
   * Records a heartbeat received at `nowMs`. A failure (re)starts the worker's window (a longer
   * one when its last window had passed), and extends its model's time out when the model is out;
   * a worker serving a model is not failing now, and once it has served items with it, its benches
   * and that model's strikes are forgiven; a draining worker is leaving (one that comes back with
   * its id starts afresh). Returns true for news: a failure of a model the worker had not failed
   * within its window.
   */
  observe(beat: WorkerHeartbeat, nowMs: number): boolean {
    const id = beat.workerId;
    if (beat.state === "draining") {
      this.last.delete(id);
      this.benches.delete(id);
      this.serving.delete(id);
      return false;
    }
    if (beat.state === "serving" && beat.model) {
      const since = this.serving.get(id);
      const servedBefore = since?.model === beat.model ? since.servedBefore : beat.servedTotal;
      const made = beat.servedTotal > servedBefore;
      this.serving.set(id, { model: beat.model, servedBefore, made });
      this.last.delete(id);
      if (made) {
        this.benches.delete(id);
        this.strikes.delete(beat.model);
        const out = this.out.get(beat.model);
        if (out) out.strikes = 0; // (out by a stale report: back with none)
      }
      return false;
    }
    this.serving.delete(id);
    if (beat.state !== "failed" || !beat.failedModel) return false;
    const before = this.last.get(id);
    const within = before !== undefined && nowMs - before.atMs < before.forMs;
    const benches = within ? (this.benches.get(id) ?? 1) : (this.benches.get(id) ?? 0) + 1;
    this.benches.set(id, benches);
    this.last.set(id, { model: beat.failedModel, atMs: nowMs, forMs: this.backoffMs(benches), ran: beat.model === beat.failedModel });
    const out = this.out.get(beat.failedModel);
    if (out) out.untilMs = Math.max(out.untilMs, nowMs + this.backoffMs(out.strikes));
    return !within || before.model !== beat.failedModel;
  }

  /** The model `workerId` failed on within its window, if any (benched, or failing on a model that is out). */
  failedLately(workerId: string, nowMs: number): string | undefined {
    const f = this.last.get(workerId);
    return f && nowMs - f.atMs < f.forMs ? f.model : undefined;
  }

  /** Unavailable models and benched workers at `nowMs`, among the workers alive now (benched ones included). */
  unavailable(nowMs: number, live: readonly string[]): Unavailable {
    for (const [id, f] of this.last) if (nowMs - f.atMs >= f.forMs) this.last.delete(id);
    for (const [model, o] of this.out) {
      if (o.untilMs > nowMs) continue;
      // Back in the pool: the failures that took it out are spent (it is tried afresh).
      this.out.delete(model);
      this.strikes.set(model, o.strikes);
      for (const [id, f] of this.last) if (f.model === model) this.last.delete(id);
    }
    // Workers gone (ids of a restarted process are new) leave nothing behind but their failures, which expire.
    const alive = new Set(live);
    for (const id of this.serving.keys()) if (!alive.has(id)) this.serving.delete(id);
    for (const id of this.benches.keys()) if (!alive.has(id)) this.benches.delete(id);
    const failedOn = new Map<string, { workers: number; lastMs: number; ran: boolean }>();
    for (const id of live) {
      const f = this.last.get(id);
      if (!f) continue;
      const n = failedOn.get(f.model) ?? { workers: 0, lastMs: 0, ran: false };
      failedOn.set(f.model, { workers: n.workers + 1, lastMs: Math.max(n.lastMs, f.atMs), ran: n.ran || f.ran });
    }
    // A worker that loaded a model serves it; one whose batches failed, only once it makes images.
    const served = new Set<string>();
    for (const id of live) {
      const s = this.serving.get(id);
      if (s && (s.made || !failedOn.get(s.model)?.ran)) served.add(s.model);
    }
    const needed = Math.max(1, Math.min(this.modelAfterWorkers, live.length));
    for (const [model, n] of failedOn) {
      // A model some live worker serves runs: the workers that cannot use it are the trouble.
      if (n.workers < needed || served.has(model) || this.out.has(model)) continue;
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

  private backoffMs(times: number): number {
    return this.benchMs * Math.min(this.maxBackoff, 2 ** Math.max(0, times - 1));
  }
}
