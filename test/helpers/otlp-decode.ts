/**
 * Decodes OTLP/HTTP protobuf trace exports with the OTLP schema: the `.proto` files of
 * opentelemetry-proto under `otlp-proto/` (copied unchanged from the npm package
 * `@opentelemetry/otlp-grpc-exporter-base@0.34.0`, `build/protos/`, Apache-2.0), read by protobufjs.
 */
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => fileURLToPath(new URL(`./otlp-proto/${target}`, import.meta.url));
root.loadSync("opentelemetry/proto/collector/trace/v1/trace_service.proto", { keepCase: false });
const ExportRequest = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest");

/** An attribute value as decoded (one of its fields set). */
export interface DecodedValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
  arrayValue?: { values: DecodedValue[] };
}

/** A span as decoded, ids in hex, attributes as plain values. */
export interface DecodedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  status: { code: number; message: string };
  /** The resource's `service.name`. */
  service: string;
  /** The instrumentation scope's name. */
  scope: string;
}

/** The plain value of a decoded attribute value (ints as numbers). */
function plain(v: DecodedValue | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return v.arrayValue.values.map(plain);
  return undefined;
}

const attributesOf = (list: { key: string; value: DecodedValue }[] = []) => Object.fromEntries(list.map((a) => [a.key, plain(a.value)]));
const hex = (b64: string) => Buffer.from(b64, "base64").toString("hex");

/** Every span of one `ExportTraceServiceRequest` body. */
export function decodeTraceExport(body: Uint8Array): DecodedSpan[] {
  const request = ExportRequest.toObject(ExportRequest.decode(body), { longs: String, bytes: String, defaults: true, oneofs: false }) as {
    resourceSpans: {
      resource: { attributes: { key: string; value: DecodedValue }[] };
      scopeSpans: { scope: { name: string }; spans: Record<string, never>[] }[];
    }[];
  };
  return request.resourceSpans.flatMap((rs) => {
    const service = String(attributesOf(rs.resource?.attributes)["service.name"] ?? "");
    return rs.scopeSpans.flatMap((ss) =>
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- protobufjs's toObject output, checked field by field below
      ss.spans.map((s: Record<string, any>): DecodedSpan => ({
        traceId: hex(s.traceId),
        spanId: hex(s.spanId),
        parentSpanId: hex(s.parentSpanId),
        traceState: s.traceState,
        name: s.name,
        kind: s.kind,
        startMs: Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000,
        endMs: Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000,
        attributes: attributesOf(s.attributes),
        links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
        status: { code: s.status?.code ?? 0, message: s.status?.message ?? "" },
        service,
        scope: ss.scope?.name ?? "",
      })),
    );
  });
}
