/**
 * One GPU worker: follows the plan's assignment, pulls batches from its model's work queue,
 * runs them on the backend and publishes each result to the router that owns the request.
 * A reassignment finishes the current batch, unloads, loads the new model, then pulls its queue.
 * Pure logic: the queue, the result publisher, the backend and the clock are ports.
 */
import { asHadisError, HadisError, toWireError } from "../../contracts/errors.ts";
import { runSplitting, type SplitOutcome } from "./bisect.ts";
import { BatchRecord } from "./batch-record.ts";
import {
  PROTOCOL_VERSION,
  WorkerStates,
  type Plan,
  type WorkerHeartbeat,
  type WorkItem,
  type WorkResult,
  type WorkerState,
} from "../../contracts/messages.ts";
import { WorkerJudge, type JudgedImage } from "./worker-judge.ts";
import type { BatchEntry, BatchObservation, Delivery, DropCounts, WorkerOptions, WorkerPorts, WorkLane } from "./ports.ts";
import { planMechanisms, type ArtifactMechanism } from "../artifact/mechanisms.ts";
import { takeArtifactBatch } from "../artifact/worker-rules.ts";
import { isDeadlineAware } from "../routing/deadline-aware.ts";
import { fitBatch } from "./deadline-batch.ts";

/**
 * Deliveries of an item a failed batch held before it fails for good: the first failure hands it
 * back (another worker, or this one after a pause, runs it: a crashed inference thread or a
 * passing fault costs a retry, not the request); a second one answers `generation_failed`.
 */
export const BATCH_TRIES = 2;

/**
 * Batches in a row whose every item failed, each alone too (a failing batch runs in halves down
 * to single items: see `runSplitting`), with no success between and two prompts at least among
 * them, after which a worker reports its model as failing (as a model that would not load). One
 * bad prompt cannot set it off alone: batched with others it fails alone; by itself it fails
 * `BATCH_TRIES` times, and a caller retrying it brings the same prompt again.
 */
export const FAILED_BATCHES_TO_REPORT = BATCH_TRIES + 1;

export type {
  BatchEntry,
  BatchObservation,
  BatchObserver,
  Delivery,
  DropCounts,
  WorkerOptions,
  WorkerPorts,
  WorkLane,
  WorkSource,
} from "./ports.ts";

/** A worker following the plan. */
export class WorkerAgent {
  private state: WorkerState = WorkerStates.idle;
  private model: string | null = null;
  private desiredModel: string | null = null;
  /** Batch size of the model being served (what heartbeats report); the plan's applies from the next pull. */
  private batchSize = 1;
  /** Batch size the plan gives the model it wants this worker on. */
  private planBatchSize = 1;
  /** What batches of the loaded model have shown: a failing model, a batch size that does not fit. */
  private readonly record = new BatchRecord();
  private planEpoch = 0;
  /** The artifact's mechanisms the plan in force runs under (none: our design). */
  private mechanisms: ReadonlySet<ArtifactMechanism> = new Set();
  /** hadis-plus's plans: a batch is only as large as its tightest deadlines allow (`shape`). */
  private fitsBatches = false;
  private inFlight = 0;
  private servedTotal = 0;
  private swapsTotal = 0;
  private lastError: string | undefined;
  /** The model whose load failed last, until a load succeeds. */
  private failedLoad: string | null = null;
  private stopping = false;
  private pullAbort: AbortController | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  readonly dropped: DropCounts = { expired: 0, wrongModel: 0 };
  /** Batches some items of which failed, alone (their items handed back or answered with `generation_failed`). */
  failedBatches = 0;
  /** Batches run smaller than pulled, their tightest deadlines not fitting the whole (hadis-plus). */
  fittedBatches = 0;
  private readonly judge: WorkerJudge | null;

  constructor(
    readonly id: string,
    private readonly ports: WorkerPorts,
    private readonly options: WorkerOptions,
  ) {
    this.judge = ports.judge
      ? new WorkerJudge(
          ports.judge,
          () => ports.now(),
          (event, fields) => ports.log(event, { workerId: id, ...fields }),
        )
      : null;
  }

  /** Takes a plan snapshot; stale epochs are ignored. Returns true if it was applied. */
  applyPlan(plan: Plan): boolean {
    if (plan.epoch < this.planEpoch) return false;
    this.planEpoch = plan.epoch;
    this.mechanisms = planMechanisms(plan);
    this.fitsBatches = isDeadlineAware(plan.policy);
    this.judge?.follow(plan);
    if (this.ports.backend.artifact)
      this.ports.backend.artifact = { latency: this.mechanisms.has("latency"), swaps: this.mechanisms.has("swaps") };
    const model = plan.assignment[this.id] ?? null;
    this.planBatchSize = model ? Math.max(1, plan.models[model]?.batchSize ?? 1) : 1;
    if (model !== this.desiredModel) {
      this.desiredModel = model;
      this.pullAbort?.abort();
      this.wake?.();
    }
    return true;
  }

  /** Starts the loop (idempotent). */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops pulling, lets the batch in flight finish, unloads; never rejects. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.state = WorkerStates.draining;
    this.pullAbort?.abort();
    this.wake?.();
    await this.loop?.catch(() => undefined);
    if (this.model) await this.ports.backend.unload(this.model).catch(() => undefined);
    this.model = null;
  }

  /** Waits `ms` before trying again, cut short by a new model to serve or a stop. */
  private async pause(ms: number): Promise<void> {
    await Promise.race([this.ports.sleep(ms), new Promise<void>((resolve) => (this.wake = resolve))]);
    this.wake = null;
  }

  /** The heartbeat describing this worker now. */
  status(backend: string): WorkerHeartbeat {
    const failedModel = this.state === WorkerStates.failed ? this.failing() : null;
    const batchCap = this.record.size(this.planBatchSize);
    return {
      v: PROTOCOL_VERSION,
      workerId: this.id,
      backend,
      model: this.model,
      state: this.state,
      batchSize: this.batchSize,
      inFlight: this.inFlight,
      servedTotal: this.servedTotal,
      swapsTotal: this.swapsTotal,
      planEpoch: this.planEpoch,
      sentAtMs: this.ports.now(),
      ...(this.lastError ? { lastError: this.lastError } : {}),
      ...(failedModel ? { failedModel } : {}),
      ...(this.model && batchCap < this.planBatchSize ? { batchCap } : {}),
    };
  }

  /**
   * The model this worker cannot use: the one whose load failed last, or the loaded one once its
   * last `failedBatchesToReport` batches all failed, on two prompts at least (until one runs).
   */
  private failing(): string | null {
    if (this.failedLoad) return this.failedLoad;
    const after = this.options.failedBatchesToReport ?? FAILED_BATCHES_TO_REPORT;
    return this.model && this.record.failing(after) ? this.model : null;
  }

  /** One run of the backend on `part`: its images (judged here when asked and a judge is held), or why it failed. */
  private async generate(
    model: string,
    part: readonly BatchEntry[],
    observed?: BatchObservation,
  ): Promise<{ ok: true; results: JudgedImage[] } | { ok: false; error: Error }> {
    try {
      const made = await this.ports.backend.generate(
        model,
        part.map((b) => ({ prompt: b.item.prompt, seed: b.item.seed, ...(b.item.options ? { options: b.item.options } : {}) })),
      );
      if (made.length !== part.length)
        throw new HadisError("generation_failed", `the backend made ${made.length} images for a batch of ${part.length}`);
      if (!this.judge) return { ok: true, results: made };
      return { ok: true, results: await this.judge.attach(model, part, made, (j) => this.observing(() => observed?.judged?.(j))) };
    } catch (err) {
      return { ok: false, error: asHadisError(err) };
    }
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        if (this.desiredModel !== this.model) {
          await this.swap();
          continue;
        }
        if (!this.model) {
          this.state = WorkerStates.idle;
          await new Promise<void>((resolve) => (this.wake = resolve));
          this.wake = null;
          continue;
        }
        // One whose batches keep failing says so until one runs; it still tries (the fault may pass).
        this.state = this.failing() ? WorkerStates.failed : WorkerStates.serving;
        const abort = new AbortController();
        this.pullAbort = abort;
        // The model is the plan's here (a swap came first otherwise).
        this.batchSize = this.record.size(this.planBatchSize);
        // Under the artifact's random dispatch a worker pulls its own queue, whatever its model.
        const lane: WorkLane = this.mechanisms.has("dispatch") ? { worker: this.id } : this.model;
        const deliveries = await this.ports.source.pull(lane, this.batchSize, this.options.pollMs, abort.signal, (d) =>
          this.answerUnrun(d),
        );
        this.pullAbort = null;
        if (deliveries.length > 0) await this.execute(this.model, deliveries);
      } catch (err) {
        this.lastError = asHadisError(err).message;
        this.ports.log("worker.loop_error", { workerId: this.id, error: this.lastError });
        await this.pause(this.options.loadRetryMs);
      }
    }
  }

  private async swap(): Promise<void> {
    const from = this.model;
    if (from) {
      this.state = WorkerStates.unloading;
      this.record.reset();
      await this.ports.backend.unload(from);
      this.model = null;
    }
    // What is wanted now: the plan may have changed again (or the worker stopped) during the unload.
    const to = this.stopping ? null : this.desiredModel;
    if (!to) return;
    this.state = WorkerStates.loading;
    const startedMs = this.ports.now();
    try {
      await this.ports.backend.load(to);
    } catch (err) {
      if (this.stopping) return; // a stopping worker says draining to the end
      this.state = WorkerStates.failed;
      this.failedLoad = to;
      this.lastError = `load ${to}: ${asHadisError(err).message}`;
      this.ports.log("worker.load_failed", { workerId: this.id, model: to, error: this.lastError });
      // Keep reporting the failure; retry after a pause unless the plan moves us elsewhere (it
      // may have during the load, when there was no pause to cut short).
      if (this.desiredModel === to) await this.pause(this.options.loadRetryMs);
      return;
    }
    this.model = to;
    this.lastError = undefined;
    this.failedLoad = null;
    this.record.reset();
    if (from) this.swapsTotal++;
    this.ports.log("worker.swapped", { workerId: this.id, from, to, ms: this.ports.now() - startedMs });
  }

  private async execute(model: string, deliveries: Delivery[]): Promise<void> {
    const now = this.ports.now();
    const batch: { item: WorkItem; delivery: Delivery }[] = [];
    for (const delivery of deliveries) {
      const item = delivery.item;
      // The artifact's worker keeps its queue through a (free) swap and runs it on its new model.
      const keptThroughSwap = this.mechanisms.has("dispatch") && this.mechanisms.has("swaps");
      if (item.model !== model && !keptThroughSwap) {
        this.dropped.wrongModel++;
        delivery.term();
        this.ports.publishResult(
          item.replyTo,
          errorResult(item, this.id, new HadisError("unknown_model", `work for "${item.model}" reached a "${model}" queue`)),
        );
        continue;
      }
      if (item.deadlineAtMs <= now) {
        // The router has already answered this request with deadline_exceeded: do not spend a GPU on it.
        this.dropExpired(delivery);
        continue;
      }
      batch.push({ item, delivery });
    }
    this.shape(model, batch, now);
    if (batch.length === 0) return;

    this.inFlight = batch.length;
    const startedMs = this.ports.now();
    let ticker: { stop(): void } | undefined;
    let observed: ReturnType<NonNullable<WorkerPorts["observer"]>["started"]> | undefined;
    let run: SplitOutcome<BatchEntry> | undefined;
    try {
      ticker = setIntervalPort(this.ports, this.options.workingEveryMs, () => batch.forEach((b) => b.delivery.working()));
      observed = this.observing(() => this.ports.observer?.started(this.id, model, batch, startedMs));
      let partStartedMs = startedMs;
      run = await runSplitting(batch, (part) => ((partStartedMs = this.ports.now()), this.generate(model, part, observed)), {
        // Each part's images go out as soon as it ran, timed as its own batch.
        served: (part, images) => this.answer(model, part, images, partStartedMs),
        stopped: () => this.stopping || this.desiredModel !== model,
        keep: (part) => part.filter((entry) => entry.item.deadlineAtMs > this.ports.now()),
      });
    } finally {
      ticker?.stop(); // first: nothing below may leave the items' deadlines extended forever
    }
    // Items that failed alone; or, when none ran at all, the first run's failure (what was left of
    // the batch expired before its part ran): said, counted and paused on the same way.
    const failure =
      run.failed.length > 0
        ? asHadisError(run.failed[0].error)
        : run.served === 0 && run.firstError
          ? asHadisError(run.firstError)
          : undefined;
    try {
      // Not run (the worker stopped or left the model mid-way): back to the queue, as a pull abandoned.
      for (const entry of run.notRun) this.handBack(entry);
      // Past their deadline by the time their part came (a failed run took the time): answered already by their routers.
      for (const entry of run.dropped) this.dropExpired(entry.delivery);
      this.record.learn(
        batch.map((b) => b.item.prompt),
        run,
        this.planBatchSize,
      );
      if (failure)
        this.fail(
          model,
          run.failed.map((f) => f.item),
          failure,
          run.runs,
        );
    } finally {
      this.inFlight = 0;
      // Which items failed (or were dropped, expired, after a failed run) matters only when others were served.
      const spanError =
        failure?.message ??
        (run.dropped.length > 0
          ? `past its deadline before its part of a failed batch ran (${run.firstError?.message ?? "failed"})`
          : undefined);
      const failedIdx =
        spanError && run.served > 0
          ? new Set([...run.failed.map((f) => f.item), ...run.dropped].map((entry) => batch.indexOf(entry)))
          : undefined;
      this.observing(() => observed?.ended(this.ports.now(), spanError, failedIdx));
    }
    if (run.served === 0 && failure && !this.stopping && this.desiredModel === model) {
      // A worker whose batches fail (a model that no longer runs) must not drain its queue into
      // errors: it says so and pauses, and the items it handed back go to others meanwhile.
      this.state = WorkerStates.failed;
      await this.pause(this.options.loadRetryMs);
    }
  }

  /**
   * What of the pulled batch runs. Under the artifact's `drops`, an item whose work deadline (its
   * request's start + 1.5 × SLO) falls before the batch would end is dropped unanswered, checked at
   * the size the batch could still reach (`serviceQueue`); under hadis-plus's plans, the batch its
   * tightest deadlines allow runs (`fitBatch`) and the rest is handed back. Mutates `batch`.
   */
  private shape(model: string, batch: BatchEntry[], now: number): void {
    const expected = this.ports.backend.expectedMs?.bind(this.ports.backend);
    if (!expected) return;
    const ms = (n: number) => expected(model, Math.max(1, n));
    if (this.mechanisms.has("drops")) {
      // (Elapsed past the work deadline + runtime > 0: the item cannot end by its deadline.)
      const taken = takeArtifactBatch([...batch], this.batchSize, ms, (e) => now - e.item.deadlineAtMs, 0);
      taken.dropped.forEach((entry) => this.dropExpired(entry.delivery));
      return void batch.splice(0, batch.length, ...taken.batch);
    }
    if (!this.fitsBatches || batch.length < 2) return;
    const last = batch.filter((e) => e.delivery.final === true);
    const { run, back } = fitBatch(batch, (e) => e.item.deadlineAtMs, now, ms, last);
    if (back.length > 0) {
      this.fittedBatches++;
      this.ports.log("worker.batch_fitted", { workerId: this.id, model, pulled: batch.length, running: run.length });
    }
    back.forEach((entry) => this.handBack(entry));
    batch.splice(0, batch.length, ...run);
  }

  /** Drops an item past its deadline (its router has answered it): counted, and terminated in the queue. */
  private dropExpired(delivery: Delivery): void {
    this.dropped.expired++;
    delivery.term();
  }

  /** Runs the observer's (tracing) code: its failure is logged, and never fails a batch. */
  private observing<T>(run: () => T): T | undefined {
    try {
      return run();
    } catch (err) {
      this.ports.log("worker.observer_failed", { workerId: this.id, error: (err as Error).message });
      return undefined;
    }
  }

  /** Publishes a batch's images and acknowledges its items. */
  private answer(model: string, batch: readonly BatchEntry[], images: JudgedImage[], startedMs: number): void {
    const execMs = this.ports.now() - startedMs;
    batch.forEach(({ item, delivery }, i) => {
      this.ports.publishResult(item.replyTo, {
        v: PROTOCOL_VERSION,
        ok: true,
        requestId: item.requestId,
        stage: item.stage,
        model,
        workerId: this.id,
        image: images[i].image,
        width: images[i].width,
        height: images[i].height,
        batchSize: batch.length,
        queueWaitMs: Math.max(0, startedMs - item.enqueuedAtMs),
        // The judging is timed apart (the judge stage's): the generation's time alone.
        execMs: Math.max(0, execMs - (images[i].verdict?.judgeMs ?? 0)),
        ...(images[i].applied ? { applied: images[i].applied } : {}),
        ...(images[i].verdict ? { verdict: images[i].verdict } : {}),
      });
      delivery.ack();
    });
    this.servedTotal += batch.length;
    this.lastError = undefined;
  }

  /** A last delivery this worker will not run (its pull was called off): answered as one handed back. */
  private answerUnrun(delivery: Delivery): void {
    this.handBack({ item: delivery.item, delivery });
  }

  /**
   * Gives an item back to the queue for another worker; on its last delivery the queue would keep
   * it undelivered until its request's deadline, so its router is told now (`no_capacity`, retryable).
   */
  private handBack({ item, delivery }: BatchEntry): void {
    if (!delivery.final) return delivery.nak();
    const times = delivery.deliveryCount ?? "many";
    this.ports.publishResult(
      item.replyTo,
      errorResult(
        item,
        this.id,
        new HadisError(
          "no_capacity",
          `work item handed back ${times} times (workers left its model before running it); it will not be delivered again`,
          { retryAfterMs: 1_000 },
        ),
      ),
    );
    delivery.term();
  }

  /** Failed items (after `runs` runs of the batch): those on their first delivery go back to the queue, the others get `generation_failed`. */
  private fail(model: string, batch: readonly BatchEntry[], e: HadisError, runs: number): void {
    this.lastError = e.message;
    let retried = 0;
    for (const { item, delivery } of batch) {
      if ((delivery.deliveryCount ?? BATCH_TRIES) < BATCH_TRIES && !delivery.final) {
        delivery.nak();
        retried++;
        continue;
      }
      this.ports.publishResult(item.replyTo, errorResult(item, this.id, new HadisError("generation_failed", e.message, {}, { cause: e })));
      delivery.ack();
    }
    this.failedBatches++;
    this.ports.log("worker.batch_failed", {
      workerId: this.id,
      model,
      failed: batch.length,
      retried,
      runs,
      inARow: this.record.inARow,
      error: e.message,
    });
  }
}

/** A failed stage's result for its router. */
export function errorResult(item: Pick<WorkItem, "requestId" | "stage" | "model">, workerId: string, err: HadisError): WorkResult {
  return {
    v: PROTOCOL_VERSION,
    ok: false,
    requestId: item.requestId,
    stage: item.stage,
    model: item.model,
    workerId,
    error: toWireError(err, PROTOCOL_VERSION).error,
  };
}

/** A repeating tick built on the ports' sleep, so simulated clocks drive it too. */
function setIntervalPort(ports: WorkerPorts, everyMs: number, tick: () => void): { stop(): void } {
  let active = true;
  void (async () => {
    while (active) {
      await ports.sleep(everyMs);
      if (active) tick();
    }
  })();
  return { stop: () => (active = false) };
}
