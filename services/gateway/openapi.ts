/**
 * The gateway's OpenAPI 3.1 document (`GET /openapi.json`): its paths, with every body's schema
 * the JSON Schema generated from the contract's zod schemas (`publicJsonSchema`), so the
 * document cannot drift from what the services check.
 */
import { ErrorCodes } from "../../contracts/errors.ts";
import { PUBLIC_SCHEMAS, publicJsonSchema, type PublicSchemaName } from "../../contracts/public.ts";

const ref = (name: PublicSchemaName) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: PublicSchemaName) => ({ "application/json": { schema: ref(name) } });

/** The HTTP statuses a route may answer with an error, each with the codes behind it. */
function errors(...statuses: number[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const status of statuses) {
    const codes = Object.entries(ErrorCodes)
      .filter(([, s]) => s === status)
      .map(([code]) => code);
    out[String(status)] = {
      description: `error: ${codes.join(", ")}${status === 429 || status === 503 ? " (with Retry-After)" : ""}`,
      ...(status === 429 || status === 503
        ? { headers: { "Retry-After": { description: "seconds to wait before retrying", schema: { type: "integer", minimum: 1 } } } }
        : {}),
      content: json("ErrorReply"),
    };
  }
  return out;
}

/** The `X-Hadis-*` headers of a PNG answer (each reply field but the image; objects as JSON). */
const PNG_HEADERS = Object.fromEntries(
  [
    "Request-Id",
    "Route",
    "Models",
    "Served-By",
    "Seed",
    "Width",
    "Height",
    "Difficulty",
    "Router-Threshold",
    "Score",
    "Threshold",
    "Plan-Epoch",
    "Timings",
    "Fallback",
    "Applied",
    "Deduplicated",
  ].map((h) => [
    `X-Hadis-${h}`,
    {
      description: `the reply's ${h.replace(/-(.)/g, (_, c: string) => c.toUpperCase()).replace(/^./, (c) => c.toLowerCase())} field (objects as JSON; characters outside printable ASCII percent-encoded)`,
      schema: { type: "string" },
    },
  ]),
);

/** Builds the OpenAPI 3.1 document of the gateway. */
export function openApiDocument(version: string): Record<string, unknown> {
  const schemas: Record<string, unknown> = {};
  for (const name of Object.keys(PUBLIC_SCHEMAS) as PublicSchemaName[]) {
    const { $schema: _drop, ...schema } = publicJsonSchema(name);
    schemas[name] = schema;
  }
  const traceparent = {
    name: "traceparent",
    in: "header",
    required: false,
    description: "W3C trace context: the request's trace continues it",
    schema: { type: "string" },
  };
  return {
    openapi: "3.1.0",
    info: {
      title: "HADIS HTTP gateway",
      version,
      description:
        "Text-to-image generation over HTTP: each route sends the request to the HADIS services over NATS, exactly as a NATS client would (hadis.generate, hadis.jobs.submit). Errors are the NATS error bodies, with their status.",
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    paths: {
      "/v1/generate": {
        post: {
          operationId: "generate",
          summary: "Generate one image and wait for it",
          parameters: [
            traceparent,
            {
              name: "Accept",
              in: "header",
              required: false,
              description:
                "image/png for the PNG with the reply's fields in X-Hadis-* headers; text/event-stream for Server-Sent Events (a preview, then the final reply); JSON otherwise",
              schema: { type: "string" },
            },
          ],
          requestBody: { required: true, content: json("GenerateRequest") },
          responses: {
            "200": {
              description:
                "the image: the JSON reply (image base64-encoded), or the PNG; with Accept: text/event-stream, Server-Sent Events whose data is a GenerateReply as JSON: `preview` (the light image the discriminator rejected, final: false; only when the request is escalated and `preview` is not false), then `final` (final: true), or `error` (an ErrorReply) in its place; the stream closes after it. The body's `preview` is on by default there, and not sent otherwise (one answer: the final reply)",
              headers: PNG_HEADERS,
              content: {
                ...json("GenerateReply"),
                "image/png": { schema: { type: "string", contentMediaType: "image/png" } },
                "text/event-stream": { schema: { type: "string" } },
              },
            },
            ...errors(400, 404, 413, 429, 500, 503, 504),
          },
        },
      },
      "/v1/jobs": {
        post: {
          operationId: "submitJob",
          summary: "Submit a generation as a job: answered at once with its id",
          parameters: [traceparent],
          requestBody: { required: true, content: json("GenerateRequest") },
          responses: {
            "202": {
              description: "accepted; follow it at the Location",
              headers: { Location: { schema: { type: "string" } } },
              content: json("JobAccepted"),
            },
            ...errors(400, 413, 429, 503, 504),
          },
        },
      },
      "/v1/jobs/{jobId}": {
        get: {
          operationId: "getJob",
          summary:
            "A job's events and result; with Accept: text/event-stream, each event as it comes (Server-Sent Events, resumable with Last-Event-ID)",
          parameters: [
            { name: "jobId", in: "path", required: true, schema: { type: "string" } },
            {
              name: "Last-Event-ID",
              in: "header",
              required: false,
              description: "SSE: resume after this event's seq",
              schema: { type: "string" },
            },
          ],
          responses: {
            "200": {
              description:
                "JSON: the events so far; SSE: one event per job event (`event:` its kind, `id:` its seq, `data:` the JSON event), closed after done or failed",
              content: { ...json("JobStatus"), "text/event-stream": { schema: { type: "string" } } },
            },
            ...errors(400, 404, 503),
          },
        },
      },
      "/v1/models": {
        get: {
          operationId: "models",
          summary: "The model pool (with the settings each supports) and the plan in force",
          responses: { "200": { description: "the pool and the plan", content: json("ModelsReply") }, ...errors(503) },
        },
      },
      "/openapi.json": {
        get: {
          operationId: "openapi",
          summary: "This document",
          responses: { "200": { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } } },
        },
      },
      "/healthz": { get: { operationId: "healthz", summary: "Liveness", responses: { "200": { description: "the process answers" } } } },
      "/readyz": {
        get: {
          operationId: "readyz",
          summary: "Readiness: NATS up, not stopping",
          responses: { "200": { description: "ready" }, "503": { description: "not ready, with each check" } },
        },
      },
    },
    components: { schemas },
  };
}
