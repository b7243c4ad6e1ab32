/**
 * The gateway's part of a request's trace: a server span continuing the caller's `traceparent`
 * (HTTP header), whose context goes on to the router in the NATS headers. With tracing off in this
 * process, the caller's `traceparent` (and `tracestate`) is passed on as it came, when valid, so
 * the services that trace still continue the caller's trace.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { MsgHdrs, NatsConnection } from "../nats/connection.ts";
import { endWithError, ServiceTelemetry, SpanKind } from "../telemetry/tracing.ts";

/** The name of the gateway's spans' service. */
export const GATEWAY_SERVICE = "hadis-gateway";

const headerOf = (req: IncomingMessage) => (name: string) => {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
};

/** Traces of the gateway's requests. */
export class GatewayTraces {
  private readonly telemetry: ServiceTelemetry;

  constructor(nc: NatsConnection) {
    this.telemetry = new ServiceTelemetry(GATEWAY_SERVICE, nc);
  }

  /**
   * Runs `send` with the NATS headers that carry the trace on (none: no trace to continue), inside
   * a server span named `name` when tracing is on; the span ends with the HTTP status, or the error.
   */
  async around(
    req: IncomingMessage,
    res: ServerResponse,
    name: string,
    send: (headers: MsgHdrs | undefined) => Promise<void>,
  ): Promise<void> {
    const header = headerOf(req);
    if (!this.telemetry.on) {
      // The W3C propagator reads the caller's context (a malformed one is none) and writes it back as it came.
      const caller = this.telemetry.extractWith(header);
      return send(caller ? this.telemetry.inject(caller) : undefined);
    }
    const span = this.telemetry.start(
      name,
      { kind: SpanKind.SERVER, attributes: { "http.request.method": req.method ?? "", "url.path": (req.url ?? "").split("?")[0] } },
      this.telemetry.extractWith(header),
    );
    try {
      await send(this.telemetry.inject(span.spanContext()));
      span.setAttribute("http.response.status_code", res.statusCode);
      span.end();
    } catch (err) {
      endWithError(span, err);
      throw err;
    }
  }

  /** Sends what the span sink holds. */
  close(): Promise<void> {
    return this.telemetry.close();
  }
}
