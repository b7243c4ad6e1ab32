import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inflateSync } from "node:zlib";
import { pingServices, startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { newHeaders } from "../../services/nats/connection.ts";
import { ServiceNames } from "../../contracts/subjects.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem();
});
afterAll(async () => {
  await t?.stop();
});

function isValidPng(bytes: Uint8Array): boolean {
  const b = Buffer.from(bytes);
  if (!b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return false;
  const width = b.readUInt32BE(16);
  const height = b.readUInt32BE(20);
  const idatLen = b.readUInt32BE(33);
  const raw = inflateSync(b.subarray(41, 41 + idatLen));
  return raw.length === (width * 3 + 1) * height;
}

describe("hadis.generate over real NATS", () => {
  const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

  it("serves an easy prompt on the light model, judged and accepted", async () => {
    const reply = await t.client.generate({ prompt: routes.light, deadlineMs: 20_000, seed: 7 });
    expect(reply.route).toBe("light");
    expect(reply.servedBy).toBe(DEFAULT_STATIC.light);
    expect(reply.models).toEqual({ light: DEFAULT_STATIC.light });
    expect(reply.score).toBeGreaterThanOrEqual(reply.threshold!);
    expect(reply.fallback).toBeUndefined(); // the cascade ran as planned
    expect(reply.seed).toBe(7);
    expect(reply.planEpoch).toBeGreaterThanOrEqual(1);
    expect(isValidPng(reply.image)).toBe(true);
    expect(reply.timings.totalMs).toBeGreaterThanOrEqual(reply.timings.lightMs);
  });

  it("sends a predicted-hard prompt straight to the heavy model", async () => {
    const reply = await t.client.generate({ prompt: routes.heavy, deadlineMs: 20_000 });
    expect(reply.route).toBe("heavy");
    expect(reply.models).toEqual({ heavy: DEFAULT_STATIC.heavy });
    expect(reply.score).toBeUndefined();
    expect(reply.timings.lightMs).toBe(0);
  });

  it("escalates a rejected light image to the heavy model", async () => {
    const reply = await t.client.generate({ prompt: routes.escalated, deadlineMs: 20_000 });
    expect(reply.route).toBe("light->heavy");
    expect(reply.models).toEqual({ light: DEFAULT_STATIC.light, heavy: DEFAULT_STATIC.heavy });
    expect(reply.score).toBeLessThan(reply.threshold!);
    expect(reply.fallback).toBeUndefined();
    expect(reply.timings.heavyMs).toBeGreaterThan(0);
  });

  it("answers 250 concurrent requests, every one with an image", async () => {
    const n = 250;
    const replies = await Promise.allSettled(
      Array.from({ length: n }, (_, i) => t.client.generate({ prompt: `a photo of thing number ${i}`, deadlineMs: 30_000 })),
    );
    const failed = replies.filter((r) => r.status === "rejected");
    expect(failed).toEqual([]);
    const ids = new Set(replies.map((r) => (r as PromiseFulfilledResult<{ requestId: string }>).value.requestId));
    expect(ids.size).toBe(n);
  });

  it("accepts JSON and answers in JSON for plain NATS clients", async () => {
    const h = newHeaders();
    h.set("Content-Type", "application/json");
    const msg = await t.nc.request("hadis.generate", JSON.stringify({ prompt: routes.heavy, deadlineMs: 20_000 }), {
      timeout: 20_000,
      headers: h,
    });
    expect(msg.headers?.get("Content-Type")).toBe("application/json");
    const body = JSON.parse(new TextDecoder().decode(msg.data));
    expect(body.route).toBe("heavy");
    expect(Buffer.from(body.image, "base64").subarray(1, 4).toString()).toBe("PNG");
  });

  it("a repeated idempotency key is generated once", async () => {
    const key = `key-${Date.now()}`;
    const [a, b] = await Promise.all([
      t.client.generate({ prompt: routes.light, idempotencyKey: key, deadlineMs: 20_000 }),
      t.client.generate({ prompt: routes.light, idempotencyKey: key, deadlineMs: 20_000 }),
    ]);
    expect(a.requestId).toBe(b.requestId);
    expect([a.deduplicated, b.deduplicated].filter(Boolean)).toHaveLength(1);
  });

  it("every service answers $SRV.PING", async () => {
    expect(await pingServices(t.nc)).toEqual(Object.values(ServiceNames).sort());
  });
});
