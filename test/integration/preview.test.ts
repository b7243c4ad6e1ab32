/**
 * Preview, then upgrade, against a real nats-server and the services: a request that asks for a
 * preview and whose light image the judge rejects gets two messages (the light image, then the
 * heavy one); one whose light image is accepted, or one that did not ask, gets one. Read as a
 * plain NATS client would (its own inbox, the `Hadis-Final` header), with `HadisClient`, as a job,
 * through the HTTP gateway's Server-Sent Events, and with `hadis generate --preview`.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { jsonSchemaValidator, readSse } from "../helpers/http.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { startGateway, type RunningGateway } from "../../services/gateway/main.ts";
import { connectNats, newHeaders, newInbox, type Msg, type NatsConnection } from "../../services/nats/connection.ts";
import { loadProfiles } from "../../services/files/profiles.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { readGenerateReply } from "../../services/client/client.ts";
import { generateCommand, previewPathOf } from "../../services/cli/generate.ts";
import { encode } from "../../contracts/envelope.ts";
import { Headers, subjects as buildSubjects } from "../../contracts/subjects.ts";
import type { GenerateReplyRead, GenerateRequest } from "../../contracts/messages.ts";
import type { JobEventRead } from "../../contracts/jobs.ts";

let t: TestSystem;
let gatewayNc: NatsConnection;
let gateway: RunningGateway;
let base: string;

beforeAll(async () => {
  t = await startTestSystem();
  gatewayNc = await connectNats(t.server.url, "hadis-gateway");
  gateway = await startGateway({
    nc: gatewayNc,
    subjects: t.system.subjects,
    profiles: loadProfiles(),
    log: createLogger("test", "error"),
    port: 0,
  });
  base = gateway.url.replace(/\/$/, "");
});
afterAll(async () => {
  await gateway?.stop(1_000);
  await gatewayNc?.close();
  await t?.stop();
});

const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
/** How long a test listens after the last message for any that should not come. */
const STRAGGLER_MS = 300;

/**
 * Sends `request` on `hadis.generate` as any NATS client can (its own inbox as the reply subject)
 * and collects every message until the one not marked `Hadis-Final: false`, then a little longer.
 */
async function everyMessage(request: GenerateRequest): Promise<Msg[]> {
  const inbox = newInbox();
  const messages: Msg[] = [];
  let lastSeen!: () => void;
  const last = new Promise<void>((resolve) => (lastSeen = resolve));
  const sub = t.nc.subscribe(inbox, {
    callback: (_err, msg) => {
      messages.push(msg);
      if (msg.headers?.get(Headers.final) !== "false") lastSeen();
    },
  });
  const headers = newHeaders();
  headers.set(Headers.contentType, "application/msgpack");
  t.nc.publish(buildSubjects().generate, encode(request), { reply: inbox, headers });
  await Promise.race([last, new Promise((_, reject) => setTimeout(() => reject(new Error("no final message in 20 s")), 20_000))]);
  await new Promise((r) => setTimeout(r, STRAGGLER_MS));
  sub.unsubscribe();
  return messages;
}

describe("hadis.generate with preview: true", () => {
  it("sends the rejected light image first (final: false), then the heavy image (final: true)", async () => {
    const messages = await everyMessage({ prompt: routes.escalated, deadlineMs: 20_000, seed: 11, preview: true });
    expect(messages.map((m) => m.headers?.get(Headers.final))).toEqual(["false", "true"]);
    const [preview, final] = messages.map(readGenerateReply);
    expect(preview).toMatchObject({ final: false, route: "light", servedBy: DEFAULT_STATIC.light, seed: 11 });
    expect(preview.score).toBeLessThan(preview.threshold!);
    expect(preview.fallback).toBeUndefined();
    expect(final).toMatchObject({ final: true, route: "light->heavy", servedBy: DEFAULT_STATIC.heavy, seed: 11 });
    expect(final.requestId).toBe(preview.requestId);
    expect(final.score).toBe(preview.score);
    expect(final.timings.totalMs).toBeGreaterThan(preview.timings.totalMs);
  });

  it("sends one message when the light image is accepted, or the prompt goes straight to the heavy model", async () => {
    const accepted = await everyMessage({ prompt: routes.light, deadlineMs: 20_000, preview: true });
    expect(accepted.map((m) => m.headers?.get(Headers.final))).toEqual(["true"]);
    expect(readGenerateReply(accepted[0])).toMatchObject({ final: true, route: "light", servedBy: DEFAULT_STATIC.light });

    const hard = await everyMessage({ prompt: routes.heavy, deadlineMs: 20_000, preview: true });
    expect(hard.map((m) => m.headers?.get(Headers.final))).toEqual(["true"]);
    expect(readGenerateReply(hard[0])).toMatchObject({ final: true, route: "heavy" });
  });

  it("sends one message, as ever, to a request that did not ask (no final field, no Hadis-Final header)", async () => {
    const messages = await everyMessage({ prompt: routes.escalated, deadlineMs: 20_000 });
    expect(messages).toHaveLength(1);
    expect(messages[0].headers?.get(Headers.final)).toBe("");
    const reply = readGenerateReply(messages[0]);
    expect(reply.route).toBe("light->heavy");
    expect(reply.final).toBeUndefined();
  });

  it("marks an error reply final too", async () => {
    // A setting no model of the plan supports: refused by the router, after the schema let it through.
    const messages = await everyMessage({ prompt: routes.escalated, deadlineMs: 20_000, steps: 1_000, preview: true });
    expect(messages).toHaveLength(1);
    expect(messages[0].headers?.get(Headers.final)).toBe("true");
    expect(() => readGenerateReply(messages[0])).toThrow(expect.objectContaining({ code: "invalid_request" }));
  });

  it("a plain request-reply caller sees only the first message: the preview", async () => {
    const msg = await t.nc.request(buildSubjects().generate, encode({ prompt: routes.escalated, deadlineMs: 20_000, preview: true }), {
      timeout: 20_000,
    });
    expect(readGenerateReply(msg)).toMatchObject({ final: false, servedBy: DEFAULT_STATIC.light });
  });

  it("HadisClient.generate hands the preview to onPreview and resolves with the final reply", async () => {
    const previews: GenerateReplyRead[] = [];
    const reply = await t.client.generate(
      { prompt: routes.escalated, deadlineMs: 20_000, preview: true },
      { onPreview: (p) => previews.push(p) },
    );
    expect(previews.map((p) => [p.final, p.servedBy])).toEqual([[false, DEFAULT_STATIC.light]]);
    expect(reply).toMatchObject({ final: true, servedBy: DEFAULT_STATIC.heavy });

    const accepted = await t.client.generate(
      { prompt: routes.light, deadlineMs: 20_000, preview: true },
      { onPreview: (p) => previews.push(p) },
    );
    expect(accepted).toMatchObject({ final: true, route: "light" });
    expect(previews).toHaveLength(1);
  });

  it("a job that asked for a preview has a preview event before done", async () => {
    const accepted = await t.client.submitJob({ prompt: routes.escalated, deadlineMs: 20_000, preview: true });
    const events: JobEventRead[] = [];
    for await (const e of t.client.job(accepted.jobId)) events.push(e);
    expect(events.map((e) => e.kind)).toEqual(["queued", "routed", "light_done", "judged", "preview", "heavy_running", "done"]);
    const preview = events.find((e) => e.kind === "preview");
    const done = events.at(-1);
    if (preview?.kind !== "preview" || done?.kind !== "done") throw new Error("no preview or no result");
    expect(preview.result).toMatchObject({ final: false, servedBy: DEFAULT_STATIC.light });
    expect(done.result).toMatchObject({ final: true, servedBy: DEFAULT_STATIC.heavy });
  });
});

describe("POST /v1/generate with Accept: text/event-stream", () => {
  const stream = (body: unknown) =>
    fetch(`${base}/v1/generate`, { method: "POST", body: JSON.stringify(body), headers: { accept: "text/event-stream" } });

  it("streams a preview event (the light image) then a final event (the heavy image), then closes", async () => {
    const res = await stream({ prompt: routes.escalated, deadlineMs: 20_000 });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const events = await readSse(res.body!);
    expect(events.map((e) => e.event)).toEqual(["preview", "final"]);
    const [preview, final] = events.map((e) => JSON.parse(e.data) as { image: string; final: boolean; servedBy: string });
    expect(preview).toMatchObject({ final: false, servedBy: DEFAULT_STATIC.light, route: "light" });
    expect(final).toMatchObject({ final: true, servedBy: DEFAULT_STATIC.heavy, route: "light->heavy" });
    for (const e of [preview, final]) expect(Buffer.from(e.image, "base64").subarray(1, 4).toString()).toBe("PNG");
    // Both are what the OpenAPI document says a generate reply is, and the document names the stream.
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as {
      paths: Record<string, { post: { responses: Record<string, { content: object }> } }>;
      components: { schemas: Record<string, object> };
    };
    expect(Object.keys(doc.paths["/v1/generate"].post.responses["200"].content)).toContain("text/event-stream");
    const ajv = jsonSchemaValidator();
    for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema, `#/components/schemas/${name}`);
    const replySchema = ajv.getSchema("#/components/schemas/GenerateReply")!;
    for (const e of [preview, final]) expect(replySchema(e), JSON.stringify(replySchema.errors)).toBe(true);
  });

  it("streams the final event alone when the light image is accepted, or the caller turned the preview off", async () => {
    const accepted = await readSse((await stream({ prompt: routes.light, deadlineMs: 20_000 })).body!);
    expect(accepted.map((e) => e.event)).toEqual(["final"]);
    expect(JSON.parse(accepted[0].data)).toMatchObject({ route: "light", final: true });

    const off = await readSse((await stream({ prompt: routes.escalated, deadlineMs: 20_000, preview: false })).body!);
    expect(off.map((e) => e.event)).toEqual(["final"]);
    expect(JSON.parse(off[0].data)).toMatchObject({ route: "light->heavy" });
  });

  it("ends with an error event when the router refuses, and refuses bad input with its status before any stream", async () => {
    const refused = await readSse((await stream({ prompt: routes.light, deadlineMs: 20_000, steps: 1_000 })).body!);
    expect(refused.map((e) => e.event)).toEqual(["error"]);
    expect(JSON.parse(refused[0].data)).toMatchObject({ v: 1, error: { code: "invalid_request", status: 400 } });

    const bad = await stream({ prompt: routes.light, preview: "yes" });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: "invalid_request", details: { field: "preview" } } });
  });

  it("answers one JSON reply without the event stream, even when the body asks for a preview", async () => {
    const res = await fetch(`${base}/v1/generate`, {
      method: "POST",
      body: JSON.stringify({ prompt: routes.escalated, deadlineMs: 20_000, preview: true }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ route: "light->heavy", servedBy: DEFAULT_STATIC.heavy });
  });
});

describe("hadis generate --preview", () => {
  /** Runs the command, its stdout captured. */
  async function generate(prompt: string, opts: { out?: string; json?: boolean }): Promise<string> {
    const out: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => (out.push(String(chunk)), true));
    try {
      await generateCommand(prompt, { nats: t.server.url, deadlineMs: 20_000, preview: true, ...opts }, {});
    } finally {
      write.mockRestore();
    }
    expect(process.exitCode ?? 0).toBe(0);
    return out.join("");
  }

  it("prints and saves the preview (out.preview.png), then the final image (out.png), saying which is which", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hadis-preview-"));
    try {
      const out = join(dir, "out.png");
      expect(previewPathOf(out)).toBe(join(dir, "out.preview.png"));
      const text = await generate(routes.escalated, { out });
      expect(text).toMatch(
        new RegExp(`^preview: ${DEFAULT_STATIC.light}'s image, rejected by the discriminator; the heavy model is making the final one\n`),
      );
      expect(text).toContain(`saved to ${join(dir, "out.preview.png")}`);
      expect(text).toMatch(new RegExp(`\nfinal: ${DEFAULT_STATIC.heavy}'s image\nrequest \\w+: light->heavy → ${DEFAULT_STATIC.heavy}`));
      for (const file of ["out.preview.png", "out.png"]) expect(readFileSync(join(dir, file)).subarray(1, 4).toString()).toBe("PNG");

      // Accepted: one image, no preview line, no preview file.
      const accepted = await generate(routes.light, { out: join(dir, "light.png") });
      expect(accepted).toMatch(/^request \w+: light → /);
      expect(() => readFileSync(join(dir, "light.preview.png"))).toThrow(/ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("with --json prints one object per message, the preview's final: false", async () => {
    const lines = (await generate(routes.escalated, { json: true }))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.final, l.servedBy])).toEqual([
      [false, DEFAULT_STATIC.light],
      [true, DEFAULT_STATIC.heavy],
    ]);
  });
});
