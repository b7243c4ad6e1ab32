/**
 * The worker's batch observer: per item a `queue <model>` span (enqueued → batch start) and an
 * `execute <model>` span, both children of the router's span carried in the work item's
 * `traceparent`; per batch one `batch <model>` span linked to every item. The result of each item
 * carries its execute span's `traceparent` back to the router. Batch sizes go to the metrics.
 */
import type { BatchObservation, BatchObserver } from "../../actors/worker/worker-agent.ts";
import { Headers } from "../../contracts/subjects.ts";
import { recordBatch } from "../lib/metrics.ts";
import { trace } from "@opentelemetry/api";
import { SpanKind, SpanStatusCode, type Link, type ServiceTelemetry, type Span } from "../lib/telemetry.ts";

const NO_TRACE: BatchObservation = { itemContext: () => undefined, ended: () => undefined };

/** A batch observer for the worker service. */
export function workerObserver(telemetry: ServiceTelemetry): BatchObserver {
  return {
    started(workerId, model, batch, startedMs) {
      recordBatch(model, batch.length);
      if (!telemetry.on) return NO_TRACE;
      // Only items that arrive inside a (sampled) request trace get spans: a worker starts no traces.
      const parents = batch.map(({ delivery }) => (delivery.header?.(Headers.traceparent) ? telemetry.extractWith((name) => delivery.header?.(name)) : null));
      const links: Link[] = [];
      parents.forEach((ctx, i) => {
        const parent = ctx && trace.getSpanContext(ctx);
        if (parent) links.push({ context: parent, attributes: { "hadis.request_id": batch[i].item.requestId } });
      });
      if (links.length === 0) return NO_TRACE;
      const common = { "hadis.model": model, "hadis.worker_id": workerId, "hadis.batch_size": batch.length };
      const batchSpan = telemetry.start(`batch ${model}`, { kind: SpanKind.INTERNAL, startTime: startedMs, links, attributes: common });
      const batchLink: Link = { context: batchSpan.spanContext(), attributes: { "hadis.link": "batch" } };
      const items: (Span | null)[] = batch.map((entry, i) => {
        const parent = parents[i];
        if (!parent) return null;
        const attrs = { ...common, "hadis.request_id": entry.item.requestId };
        const queued = telemetry.start(`queue ${model}`, { kind: SpanKind.CONSUMER, startTime: Math.min(entry.item.enqueuedAtMs, startedMs), attributes: attrs }, parent);
        queued.end(startedMs);
        return telemetry.start(`execute ${model}`, { kind: SpanKind.CONSUMER, startTime: startedMs, links: [batchLink], attributes: attrs }, parent);
      });
      return {
        itemContext: (i) => (items[i] ? telemetry.inject(telemetry.contextOf(items[i]!)) : undefined),
        ended(endedMs, error) {
          for (const span of [...items, batchSpan]) {
            if (!span) continue;
            if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
            span.end(endedMs);
          }
        },
      };
    },
  };
}
