/**
 * What a worker is given and gives back: its deliveries and where they come from, its side effects
 * (the ports a service, the simulator or a test supplies), what an observer of its batches sees,
 * its tunables and its drop counts. Apart from `worker-agent.ts`, which runs the loop over them.
 */
import type { WorkerVerdict, WorkItem, WorkResult } from "../../contracts/messages.ts";
import type { GenerationBackend, JudgeBackend } from "./backend.ts";

/**
 * One work item pulled from a work queue, read and checked by the queue (an item that does not
 * read is refused there and never reaches a worker), with its acknowledgement controls.
 */
export interface Delivery {
  item: WorkItem;
  /** Done: remove from the queue. */
  ack(): void;
  /** Never deliver again (poison or expired). */
  term(): void;
  /** Give back for redelivery now. */
  nak(): void;
  /** Still working: extend the ack deadline. */
  working(): void;
  /** A header of the message (e.g. `traceparent`), when the transport has headers. */
  header?(name: string): string | undefined;
  /** How many times the queue has delivered this item, this time included (1 the first time), when it says. */
  deliveryCount?: number;
  /** The queue's last delivery of the item: handed back, it is never delivered again (nobody would answer its request). */
  final?: boolean;
}

/** A queue a worker pulls: its model's shared one, or its own (the artifact's random dispatch). */
export type WorkLane = string | { worker: string };

/** Where work comes from. */
export interface WorkSource {
  /**
   * Up to `max` deliveries of a lane (a model's queue, or this worker's own); waits at most
   * `waitMs` for the first; [] when none. `lastCalledOff`: a last delivery that reached the pull
   * after it was called off (it cannot go back to the queue: nothing would deliver it again), for
   * the worker to answer.
   */
  pull(lane: WorkLane, max: number, waitMs: number, signal: AbortSignal, lastCalledOff?: (delivery: Delivery) => void): Promise<Delivery[]>;
}

/** The worker's side effects, supplied by the service (or the simulator, or tests). */
export interface WorkerPorts {
  source: WorkSource;
  /** Sends a result to the router that queued the item. */
  publishResult(replyTo: string, result: WorkResult): void;
  backend: GenerationBackend;
  /** A judge on this worker: light images whose items ask for a verdict are judged here, right after their batch (none: never). */
  judge?: JudgeBackend;
  now(): number;
  sleep(ms: number): Promise<void>;
  log(event: string, fields: Record<string, unknown>): void;
  /** Optional observer of batches (tracing, metrics), supplied by the service. */
  observer?: BatchObserver;
}

/** One item of a batch as the observer sees it. */
export interface BatchEntry {
  item: WorkItem;
  delivery: Delivery;
}

/** Watches batches run; the service turns this into spans and metrics. */
export interface BatchObserver {
  /** A batch starts executing at `startedMs`. */
  started(workerId: string, model: string, batch: readonly BatchEntry[], startedMs: number): BatchObservation;
}

/** One observed batch. */
export interface BatchObservation {
  /** The batch ended (its results are published); `error` when it failed: all its items, or those in `failed` (indexes), when given. */
  ended(endedMs: number, error?: string, failed?: ReadonlySet<number>): void;
  /** Images of the batch were judged on the worker (before their results went out). */
  judged?(judgement: WorkerJudgement): void;
}

/** The verdicts a worker gave on one part of a batch, for the observer (spans, the verdict metric). */
export interface WorkerJudgement {
  entries: readonly BatchEntry[];
  verdicts: readonly WorkerVerdict[];
  startedMs: number;
  endedMs: number;
}

/** Tunables of the worker loop. */
export interface WorkerOptions {
  /** Longest wait of one pull for the first message, ms. */
  pollMs: number;
  /** Interval of "still working" signals during a batch, ms (below the consumer's ack wait). */
  workingEveryMs: number;
  /** Wait before retrying a failed model load, ms. */
  loadRetryMs: number;
  /** Failed batches in a row after which the model is reported as failing (default `FAILED_BATCHES_TO_REPORT`). */
  failedBatchesToReport?: number;
}

/** Counters of what the worker dropped, by reason (an item that did not read was refused by the queue). */
export interface DropCounts {
  expired: number;
  wrongModel: number;
}
