/**
 * The router's view of each request's trace: one `hadis.generate` server span per request
 * (continuing the caller's `traceparent` when it sent one) and the stage spans the request
 * machine's actors open under it (route, light/heavy generation, judge, reply). Also records the
 * request metrics. When tracing is off only the metrics run.
 */
import { HadisError, asHadisError } from "../../contracts/errors.ts";
import type { GenerateReply } from "../../contracts/messages.ts";
import type { SloOutcome } from "../../actors/request/reply.ts";
import { recordRequest } from "../telemetry/metrics.ts";
import { headerOf, type MsgHdrs } from "../nats/connection.ts";
import { QueueGroups } from "../../contracts/subjects.ts";
import {
  endWithError,
  messagingAttributes,
  REQUEST_SPAN,
  SpanKind,
  type Attributes,
  type ServiceTelemetry,
  type Span,
  type SpanContext,
} from "../telemetry/tracing.ts";

/** A request's root span, handed from the subject handler to the request machine's actors. */
export type RequestSpan = Span;

/** Child span of a request stage (its span context goes into outgoing headers). */
export type StageSpan = Span;

/** Traces of the requests in flight on one router. */
export class RequestTraces {
  private readonly live = new Map<string, Span>();

  constructor(readonly telemetry: ServiceTelemetry) {}

  /**
   * Starts a request's root span from the incoming message; null when tracing is off or the
   * sampler drops this request (then nothing downstream traces it either: no headers are sent).
   */
  receive(subject: string, headers: MsgHdrs | undefined, routerId: string): RequestSpan | null {
    if (!this.telemetry.on) return null;
    // (A caller's `Traceparent` is its `traceparent`: header names are read in any case.)
    const parent = this.telemetry.extractWith((name) => headerOf(headers, name) || undefined);
    const span = this.telemetry.start(
      REQUEST_SPAN,
      {
        kind: SpanKind.SERVER,
        attributes: {
          ...messagingAttributes({ type: "process", name: "process", destination: subject, consumerGroup: QueueGroups.router }),
          "hadis.router_id": routerId,
        },
      },
      parent,
    );
    return span.isRecording() ? span : null;
  }

  /** Binds a request id to its root span so the actors find it. */
  bind(requestId: string, root: RequestSpan | null, attributes: Attributes): void {
    if (!root) return;
    root.setAttribute("hadis.request_id", requestId).setAttributes(attributes);
    this.live.set(requestId, root);
  }

  /** The request's root span context (to carry in outgoing headers), or null when not traced. */
  context(requestId: string): SpanContext | null {
    return this.live.get(requestId)?.spanContext() ?? null;
  }

  /** Opens a stage span under the request's root; null when the request is not traced. */
  stage(requestId: string, name: string, kind: SpanKind, attributes: Attributes = {}): StageSpan | null {
    const root = this.live.get(requestId);
    return root ? this.telemetry.start(name, { kind, attributes }, root.spanContext()) : null;
  }

  /**
   * Ends a request: metrics always, the root span when traced. `slo` is how it counts in the SLO
   * (`sloOutcome`: requests refused at the edge, or given less than the SLO, count in none).
   */
  finish(
    root: RequestSpan | null,
    requestId: string | undefined,
    reply: GenerateReply | null,
    err: unknown,
    sloMs: number,
    slo: SloOutcome,
  ): void {
    const outcome = reply ? "ok" : asHadisError(err).code;
    recordRequest(reply, outcome, slo);
    if (requestId) this.live.delete(requestId);
    if (!root) return;
    const span = root;
    if (reply) {
      span.setAttributes({
        "hadis.request_id": reply.requestId,
        "hadis.route": reply.route,
        "hadis.served_by": reply.servedBy,
        "hadis.models": [reply.models.light, reply.models.heavy].filter((m): m is string => !!m),
        "hadis.plan_epoch": reply.planEpoch,
        "hadis.difficulty": reply.difficulty,
        "hadis.router_threshold": reply.routerThreshold,
        "hadis.total_ms": reply.timings.totalMs,
        "hadis.slo_ms": sloMs,
        ...(slo.answered ? { "hadis.slo_met": !slo.violated } : {}),
        "hadis.outcome": "ok",
        ...(reply.score !== undefined ? { "hadis.disc.score": reply.score, "hadis.disc.threshold": reply.threshold! } : {}),
        ...(reply.deduplicated ? { "hadis.deduplicated": true } : {}),
        ...(reply.fallback ? { "hadis.fallback": reply.fallback } : {}),
      });
      span.end();
    } else {
      span.setAttributes({ "hadis.outcome": outcome, "hadis.slo_ms": sloMs, ...(slo.answered ? { "hadis.slo_met": false } : {}) });
      endWithError(span, err instanceof HadisError ? err : asHadisError(err));
    }
  }
}
