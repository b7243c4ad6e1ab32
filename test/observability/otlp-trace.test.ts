/**
 * A request's trace as the official OTLP/HTTP protobuf exporter sends it, to a receiver in this
 * test that decodes each export with the OTLP schema (test/helpers/otlp-decode.ts): the spans,
 * parents, links and attributes an operator reads in Jaeger or Tempo, and the messaging semantic
 * conventions on the stage spans.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SpanKind } from "@opentelemetry/api";
import { configureTelemetry, flushTelemetry, shutdownTelemetry } from "../../services/telemetry/tracing.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { readGenerateReply } from "../../services/client/client.ts";
import { newHeaders } from "../../services/nats/connection.ts";
import { encode } from "../../contracts/envelope.ts";
import { QueueGroups } from "../../contracts/subjects.ts";
import { decodeTraceExport, type DecodedSpan } from "../helpers/otlp-decode.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { waitFor } from "../helpers/processes.ts";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

const received: { path: string; type: string; spans: DecodedSpan[] }[] = [];
let receiver: Server;
let t: TestSystem;
const savedDelay = process.env.OTEL_BSP_SCHEDULE_DELAY;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      received.push({ path: req.url ?? "", type: req.headers["content-type"] ?? "", spans: decodeTraceExport(Buffer.concat(chunks)) });
      res.writeHead(200, { "Content-Type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", () => r()));
  process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
  configureTelemetry({ enabled: true, spanSink: false, otlpUrl: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v1/traces` });
  // The discriminator's judge span (the worker's is test/integration/judge-on-worker.test.ts's).
  t = await startTestSystem({ policy: "static", judgeOnWorker: false });
});
afterAll(async () => {
  await t?.stop();
  await shutdownTelemetry();
  receiver?.close();
  if (savedDelay === undefined) delete process.env.OTEL_BSP_SCHEDULE_DELAY;
  else process.env.OTEL_BSP_SCHEDULE_DELAY = savedDelay;
});

const allSpans = () => received.flatMap((r) => r.spans);

describe("a light→heavy request's trace, exported over OTLP/HTTP protobuf", () => {
  it("has every span with its parent, links and attributes, decoded with the OTLP schema", async () => {
    const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const callerSpanId = "00f067aa0ba902b7";
    const h = newHeaders();
    h.set("traceparent", `00-${traceId}-${callerSpanId}-01`);
    const reply = readGenerateReply(
      await t.nc.request("hadis.generate", encode({ prompt: routes.escalated, deadlineMs: 20_000 }), { timeout: 20_000, headers: h }),
    );
    expect(reply.route).toBe("light->heavy");

    const inTrace = () => allSpans().filter((s) => s.traceId === traceId);
    await waitFor(
      async () => {
        await flushTelemetry();
        return inTrace().some((s) => s.name === "hadis.generate") && inTrace().filter((s) => s.name.startsWith("execute")).length >= 2;
      },
      10_000,
      "the trace's spans at the receiver",
    );
    expect(received.every((r) => r.path === "/v1/traces" && r.type === "application/x-protobuf")).toBe(true);

    const spans = inTrace();
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const named = (n: string) => spans.filter((s) => s.name === n);
    const parentName = (s: DecodedSpan) => byId.get(s.parentSpanId)?.name;
    const { light: lightModel, heavy: heavyModel } = DEFAULT_STATIC;

    // The spans of today's trace, each from its service, each under its parent.
    const root = named("hadis.generate")[0];
    expect(root.parentSpanId).toBe(callerSpanId);
    expect(root.service).toBe("hadis-router");
    expect(root.kind).toBe(SpanKind.SERVER + 1); // OTLP numbers kinds from 1 (UNSPECIFIED is 0)
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(["hadis-router", "hadis-worker", "hadis-discriminator"]));
    const light = named(`light ${lightModel}`)[0];
    const heavy = named(`heavy ${heavyModel}`)[0];
    for (const stage of [named("route")[0], light, heavy, named("reply")[0]]) expect(parentName(stage)).toBe("hadis.generate");
    expect(parentName(named(`queue ${lightModel}`)[0])).toBe(light.name);
    expect(parentName(named(`execute ${lightModel}`)[0])).toBe(light.name);
    expect(parentName(named(`queue ${heavyModel}`)[0])).toBe(heavy.name);
    expect(parentName(named(`execute ${heavyModel}`)[0])).toBe(heavy.name);
    const judge = named("judge").find((s) => s.service === "hadis-discriminator")!;
    expect(parentName(judge)).toBe("hadis.generate");
    const startsBeforeParent = spans.filter((s) => s !== root && s.startMs < byId.get(s.parentSpanId)!.startMs).map((s) => s.name);
    expect(startsBeforeParent, "every span starts within its parent").toEqual([]);

    // The attributes an operator reads.
    expect(root.attributes).toMatchObject({
      "hadis.route": "light->heavy",
      "hadis.models": [lightModel, heavyModel],
      "hadis.plan_epoch": reply.planEpoch,
      "hadis.deadline_ms": 20_000,
      "hadis.disc.score": reply.score,
      "hadis.request_id": reply.requestId,
      "hadis.outcome": "ok",
    });
    expect(judge.attributes).toMatchObject({ "hadis.disc.accept": false, "hadis.plan_epoch": reply.planEpoch });

    // Links: the worker's batch span (a trace of its own) links to the item's stage span; the execute span to the batch.
    const batch = allSpans().find((s) => s.name === `batch ${lightModel}` && s.links.some((l) => l.spanId === light.spanId));
    expect(batch).toBeDefined();
    expect(batch!.links).toContainEqual({ traceId, spanId: light.spanId });
    const execute = named(`execute ${lightModel}`)[0];
    expect(execute.links).toEqual([{ traceId: batch!.traceId, spanId: batch!.spanId }]);
    expect(execute.attributes["hadis.batch_size"]).toBeGreaterThanOrEqual(1);

    // The messaging semantic conventions on the stage spans.
    const work = (model: string) => `hadis.work.${model}`;
    expect(root.attributes).toMatchObject({
      "messaging.system": "nats",
      "messaging.operation.type": "process",
      "messaging.destination.name": "hadis.generate",
      "messaging.consumer.group.name": QueueGroups.router,
    });
    expect(light.attributes).toMatchObject({
      "messaging.system": "nats",
      "messaging.operation.type": "send",
      "messaging.destination.name": work(lightModel),
      "messaging.message.id": `${reply.requestId}/light/${lightModel}`,
    });
    expect(named(`queue ${lightModel}`)[0].attributes).toMatchObject({
      "messaging.operation.type": "receive",
      "messaging.destination.name": work(lightModel),
      "messaging.consumer.group.name": `work-${lightModel}`,
      "messaging.message.id": `${reply.requestId}/light/${lightModel}`,
    });
    expect(execute.attributes).toMatchObject({
      "messaging.operation.type": "process",
      "messaging.consumer.group.name": `work-${lightModel}`,
    });
    expect(judge.attributes).toMatchObject({
      "messaging.system": "nats",
      "messaging.destination.name": "hadis.judge",
      "messaging.consumer.group.name": QueueGroups.discriminator,
    });
    expect(named("reply")[0].attributes).toMatchObject({
      "messaging.system": "nats",
      "messaging.operation.type": "send",
      "messaging.destination.temporary": true,
    });
  });
});
