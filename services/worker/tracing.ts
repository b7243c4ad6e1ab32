/**
 * The worker's batch observer: per item a `queue <model>` span (enqueued → batch start: the pull
 * that received it) and an `execute <model>` span (its processing), both children of the router's
 * stage span carried in the work item's `traceparent`, with the messaging semantic conventions
 * (the model's work subject, its JetStream consumer, the item's message id); per batch one
 * `batch <model>` span linked to every item; per light image judged on the worker a `judge` span
 * (`hadis.judged_on: worker`) under the same parent, where the discriminator's would be. Batch
 * sizes and verdicts go to the metrics.
 */
import type { BatchObservation, BatchObserver } from "../../actors/worker/worker-agent.ts";
import { Headers, type Subjects } from "../../contracts/subjects.ts";
import { recordBatch, recordVerdict } from "../telemetry/metrics.ts";
import type { WorkerJudgement } from "../../actors/worker/ports.ts";
import {
  messagingAttributes,
  SpanKind,
  SpanStatusCode,
  type Link,
  type ServiceTelemetry,
  type Span,
  type SpanContext,
} from "../telemetry/tracing.ts";

/** Counts the verdicts given on the worker (as the discriminator counts its own). */
const countVerdicts = (j: WorkerJudgement) => j.verdicts.forEach((v) => recordVerdict(v.accept));
const NO_TRACE: BatchObservation = { ended: () => undefined, judged: countVerdicts };

/** A batch observer for the worker service; `judgeKind` names the judge the workers hold, when they do. */
export function workerObserver(telemetry: ServiceTelemetry, subjects: Subjects, judgeKind?: string): BatchObserver {
  return {
    started(workerId, model, batch, startedMs) {
      recordBatch(model, batch.length);
      if (!telemetry.on) return NO_TRACE;
      // Only items that arrive inside a (sampled) request trace get spans: a worker starts no traces.
      const parents: (SpanContext | undefined)[] = [];
      const links: Link[] = [];
      for (const { delivery } of batch) {
        const parent = delivery.header ? telemetry.extractWith(delivery.header) : undefined;
        parents.push(parent);
        if (parent) links.push({ context: parent });
      }
      if (links.length === 0) return NO_TRACE;
      const destination = subjects.work(model);
      const consumerGroup = subjects.names.workConsumer(model);
      const batchSpan = telemetry.start(`batch ${model}`, {
        kind: SpanKind.INTERNAL,
        startTime: startedMs,
        links,
        attributes: {
          ...messagingAttributes({ type: "process", name: "process", destination, consumerGroup, batchCount: batch.length }),
          "hadis.model": model,
          "hadis.worker_id": workerId,
          "hadis.batch_size": batch.length,
        },
      });
      const batchLinks: Link[] = [{ context: batchSpan.spanContext() }];
      /** Each item's execute span (its queue span has ended), with the item's index in the batch. */
      const items: [Span, number][] = [];
      const parentOf = new Map(batch.map((entry, i) => [entry.item, parents[i]]));
      batch.forEach((entry, i) => {
        const parent = parents[i];
        if (!parent) return;
        // Each span takes its attributes object as its own.
        const messageId = entry.delivery.header?.(Headers.msgId);
        const attributes = (type: "receive" | "process", name: string) => ({
          ...messagingAttributes({ type, name, destination, consumerGroup, ...(messageId ? { messageId } : {}) }),
          "hadis.model": model,
          "hadis.worker_id": workerId,
          "hadis.batch_size": batch.length,
          "hadis.request_id": entry.item.requestId,
        });
        const queued = telemetry.start(
          `queue ${model}`,
          { kind: SpanKind.CONSUMER, startTime: Math.min(entry.item.enqueuedAtMs, startedMs), attributes: attributes("receive", "fetch") },
          parent,
        );
        queued.end(startedMs);
        const execute = telemetry.start(
          `execute ${model}`,
          { kind: SpanKind.CONSUMER, startTime: startedMs, links: batchLinks, attributes: attributes("process", "process") },
          parent,
        );
        items.push([execute, i]);
      });
      return {
        ended(endedMs, error, failed) {
          // The batch span fails with any item; an item's span with its own failure.
          const end = (span: Span, failedHere: boolean) => {
            if (error && failedHere) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
            span.end(endedMs);
          };
          end(batchSpan, true);
          for (const [span, i] of items) end(span, !failed || failed.has(i));
        },
        judged(judgement) {
          countVerdicts(judgement);
          judgement.entries.forEach(({ item }, k) => {
            const parent = parentOf.get(item);
            if (!parent) return;
            const verdict = judgement.verdicts[k];
            const span = telemetry.start(
              "judge",
              {
                kind: SpanKind.INTERNAL,
                startTime: judgement.startedMs,
                attributes: {
                  "hadis.judged_on": "worker",
                  "hadis.worker_id": workerId,
                  "hadis.model": model,
                  "hadis.request_id": item.requestId,
                  ...(judgeKind ? { "hadis.judge.backend": judgeKind } : {}),
                  "hadis.disc.score": verdict.score,
                  "hadis.disc.threshold": verdict.threshold,
                  "hadis.disc.accept": verdict.accept,
                  "hadis.plan_epoch": verdict.planEpoch,
                },
              },
              parent,
            );
            span.end(judgement.endedMs);
          });
        },
      };
    },
  };
}
