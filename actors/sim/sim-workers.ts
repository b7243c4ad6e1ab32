/**
 * The simulator's workers, with the batch, expiry and swap semantics of `WorkerAgent`: work is
 * pushed to a model's shared queue (or, under the artifact's random dispatch, to a listed
 * worker's own queue), an idle worker pulls a batch, and a worker whose plan changed its model
 * unloads, then loads what the plan wants once the unload is done.
 */
import { takeArtifactBatch } from "../artifact/worker-rules.ts";
import { fitBatch } from "../worker/deadline-batch.ts";
import { checkMs, execMs, type SimState } from "./sim-state.ts";
import type { SimWorker, WorkItem } from "./types.ts";

/** A random worker the load balancer lists for `model` (none: null). Without free swaps, only workers still meant to hold it. */
function pickWorker(s: SimState, model: string): SimWorker | null {
  const listed = (s.routing.get(model) ?? []).filter((w) => s.freeSwaps || w.desired === model);
  return listed.length > 0 ? listed[Math.floor(s.random() * listed.length)] : null;
}

/** Queues one item: on a listed worker (random dispatch, held while none is), or on its model's queue, waking idle pullers. */
export function push(s: SimState, item: WorkItem): void {
  if (s.dispatch) {
    const w = pickWorker(s, item.model);
    if (!w) return void s.queues.get(item.model)!.push(item);
    w.queue.push(item);
    if (!w.busy) advance(s, w);
    return;
  }
  s.queues.get(item.model)!.push(item);
  const idle = s.waitingPulls.get(item.model)!;
  while (idle.length > 0 && s.queues.get(item.model)!.length > 0) {
    const w = idle.shift()!;
    if (!w.busy && w.model === item.model && w.desired === item.model) pull(s, w);
  }
}

/** The worker loop after a batch, a swap or a wake-up (WorkerAgent.run). */
export function advance(s: SimState, w: SimWorker): void {
  if (w.busy) return;
  if (w.desired !== w.model) return startSwap(s, w);
  if (!w.model) return;
  pull(s, w);
}

/** Takes the next batch (expired items dropped unexecuted) and schedules its end; an idle worker waits on its model's queue. */
function pull(s: SimState, w: SimWorker): void {
  const model = w.model!;
  const queue = s.dispatch ? w.queue : s.queues.get(model)!;
  for (;;) {
    if (queue.length === 0) {
      if (s.dispatch) return;
      const idle = s.waitingPulls.get(model)!;
      if (!idle.includes(w)) idle.push(w);
      return;
    }
    let batch: WorkItem[];
    if (s.drops) {
      const taken = takeArtifactBatch(
        queue,
        w.batchSize,
        (n) => checkMs(s, model, n),
        (it) => s.now - it.req.arrivalMs,
        s.startLimitMs,
      );
      s.result.expiredDrops += taken.dropped.length;
      batch = taken.batch;
    } else {
      const taken = queue.splice(0, w.batchSize);
      // Expired items are dropped unexecuted; they still took their place in the pull.
      batch = taken.filter((it) => it.deadlineAtMs > s.now);
      s.result.expiredDrops += taken.length - batch.length;
      if (s.fitBatches && batch.length > 1) batch = fitted(s, model, batch, queue);
    }
    if (batch.length === 0) continue;
    if (!s.dispatch) {
      const idle = s.waitingPulls.get(model)!;
      const at = idle.indexOf(w);
      if (at >= 0) idle.splice(at, 1);
    }
    w.busy = true;
    w.batch = batch;
    w.batchModel = model;
    w.batchMs = execMs(s, model, batch.length);
    s.agenda.push(s.now + w.batchMs, { kind: "batchDone", worker: w });
    return;
  }
}

/** hadis-plus: the batch its tightest deadlines allow (`fitBatch`); the rest go back to the head of the queue. */
function fitted(s: SimState, model: string, pulled: WorkItem[], queue: WorkItem[]): WorkItem[] {
  const { run, back } = fitBatch(
    pulled,
    (it) => it.deadlineAtMs,
    s.now,
    (k) => checkMs(s, model, k),
  );
  if (back.length > 0) s.result.batchesFitted++;
  queue.unshift(...back);
  return run;
}

/** WorkerAgent.swap: unload first; the model to load is chosen when the unload is done. Free under the artifact's `swaps`. */
function startSwap(s: SimState, w: SimWorker): void {
  const from = w.model;
  if (from) {
    const idle = s.waitingPulls.get(from)!;
    const at = idle.indexOf(w);
    if (at >= 0) idle.splice(at, 1);
  }
  if (s.freeSwaps) {
    w.model = w.desired;
    if (from && w.desired) w.swaps++;
    if (w.desired) s.result.loads.push({ atMs: s.now, workerId: w.id, model: w.desired });
    return advance(s, w);
  }
  w.busy = true;
  w.model = null;
  if (!from) return startLoad(s, w, null);
  w.unloading = from;
  s.agenda.push(s.now + s.profiles.byName.get(from)!.unloadMs * s.timeScale, { kind: "unloaded", worker: w, from });
}

/** Loads what the plan wants now: a plan that changed during the unload is followed, not the one the swap began for. */
function startLoad(s: SimState, w: SimWorker, from: string | null): void {
  const to = w.desired;
  if (!to) {
    w.busy = false;
    return;
  }
  s.agenda.push(s.now + s.profiles.byName.get(to)!.loadMs * s.timeScale, { kind: "loaded", worker: w, from, to });
}

/** The unload of `from` is done: load what the plan wants now. */
export function unloaded(s: SimState, w: SimWorker, from: string): void {
  w.unloading = null;
  startLoad(s, w, from);
}

/** The load of `to` is done: the worker holds it (a swap if it held `from`) and goes back to its loop. */
export function loaded(s: SimState, w: SimWorker, from: string | null, to: string): void {
  w.busy = false;
  w.model = to;
  if (from) w.swaps++;
  s.result.loads.push({ atMs: s.now, workerId: w.id, model: to });
  advance(s, w);
}

/** WorkerAgent.status() on every heartbeat: the loaded model, or the one still unloading; none while loading. */
export function heartbeat(s: SimState): void {
  for (const w of s.workers) w.reported = w.model ?? w.unloading;
}

/** The load balancer's once-a-second rebuild of its routing tables from the models workers report. */
export function rebuildRouting(s: SimState): void {
  s.routing = new Map();
  for (const w of s.workers) {
    const m = s.freeSwaps ? w.desired : w.model;
    if (m) s.routing.set(m, [...(s.routing.get(m) ?? []), w]);
  }
  // Items held while no worker of their model was listed go out now.
  for (const [m, q] of s.queues) {
    if (q.length === 0 || !s.routing.has(m)) continue;
    s.queues.set(m, []);
    for (const item of q) push(s, item);
  }
}
