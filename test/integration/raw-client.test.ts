/**
 * `hadis.generate` as a client we did not write sees it, over the protocol text: header names in
 * any case, JSON without a header, ASCII route names, prompts of control characters only, and
 * `$SRV.STATS` figures that count the whole asynchronous handling.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Packr } from "msgpackr";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { rawHeader, RawNatsClient, type RawMessage } from "../helpers/raw-nats.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { Routes } from "../../contracts/messages.ts";

let t: TestSystem;
let raw: RawNatsClient;
const packr = new Packr({ useRecords: false });
const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

beforeAll(async () => {
  // Time scale 0.01: a heavy image (sd3.5-medium) takes 130 ms, far above what a handler's synchronous part takes.
  // The discriminator judges (the workers do not): its $SRV.STATS count its verdicts.
  t = await startTestSystem({ workers: 2, timeScale: 0.01, judgeOnWorker: false });
  raw = await RawNatsClient.open(t.server.url);
}, 30_000);
afterAll(async () => {
  raw?.close();
  await t?.stop();
});

const json = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));
const readJson = (m: RawMessage) => JSON.parse(m.data.toString("utf8"));

describe("a raw NATS client on hadis.generate", () => {
  for (const name of ["content-type", "CONTENT-TYPE", "Content-type"]) {
    it(`reads a JSON request whose header is named "${name}", and answers in JSON`, async () => {
      const reply = await raw.request(
        "hadis.generate",
        json({ prompt: routes.light, deadlineMs: 20_000 }),
        [[name, "application/json"]],
        20_000,
      );
      expect(rawHeader(reply, "Nats-Service-Error"), reply.data.toString()).toBeUndefined();
      expect(rawHeader(reply, "Content-Type")).toBe("application/json");
      expect(readJson(reply).route).toBe("light");
    });
  }

  it("reads a JSON body sent without any header as JSON, and answers in JSON", async () => {
    const reply = await raw.request("hadis.generate", json({ prompt: routes.heavy, deadlineMs: 20_000 }), [], 20_000);
    expect(rawHeader(reply, "Content-Type")).toBe("application/json");
    expect(readJson(reply).route).toBe("heavy");
  });

  it("refuses a JSON body sent as msgpack, naming the header to set", async () => {
    const reply = await raw.request("hadis.generate", json({ prompt: "a cat" }), [["content-type", "application/msgpack"]], 5_000);
    expect(rawHeader(reply, "Nats-Service-Error-Code")).toBe("400");
    const body = packr.unpack(reply.data);
    expect(body.error.code).toBe("malformed_payload");
    expect(body.error.message).toContain("Content-Type: application/json");
  });

  it("answers an escalated request with an ASCII route, every byte of the JSON reply below 0x80", async () => {
    const reply = await raw.request(
      "hadis.generate",
      json({ prompt: routes.escalated, deadlineMs: 20_000 }),
      [["content-type", "application/json"]],
      20_000,
    );
    expect(readJson(reply).route).toBe("light->heavy");
    expect(Routes.lightThenHeavy).toBe("light->heavy");
    expect([...reply.data].every((b) => b < 0x80)).toBe(true);
  });

  for (const [what, prompt] of [
    ["NUL bytes", "\0\0\0"],
    ["control characters", "\u001b\u0007\r\n\u007f\u0085"],
    ["zero-width spaces and a BOM", "\u200b\u200b\ufeff"],
  ] as const) {
    it(`refuses a prompt of ${what} only as empty, as it does a blank one`, async () => {
      const reply = await raw.request("hadis.generate", json({ prompt }), [["content-type", "application/json"]], 5_000);
      expect(rawHeader(reply, "Nats-Service-Error-Code")).toBe("400");
      expect(readJson(reply).error).toMatchObject({ code: "invalid_request", details: { field: "prompt" } });
      expect(readJson(reply).error.message).toMatch(/^generate request: |^prompt is empty/);
    });
  }

  it("$SRV.STATS counts the router's error replies and times each request's whole handling", async () => {
    // What the raw requests above did: 3 refusals (the JSON sent as msgpack, and prompts the service calls empty) at least.
    const stats = JSON.parse((await t.nc.request("$SRV.STATS.hadis-router", new Uint8Array(), { timeout: 2_000 })).string());
    const generate = stats.endpoints.find((e: { name: string }) => e.name === "generate");
    expect(generate.num_errors).toBeGreaterThanOrEqual(4);
    expect(generate.num_errors).toBe(generate.data.errors);
    expect(generate.last_error).toMatch(/^invalid_request: /);
    // Two of the served requests had a heavy image made (130 ms each at this time scale), the
    // others a light one (13 ms); refusals take a ms. The times are the whole handling's, not the
    // fraction of a ms the handler runs before it first awaits (all nats.js could time).
    expect(generate.num_requests).toBeGreaterThanOrEqual(9);
    expect(generate.processing_time).toBeGreaterThan(2 * 130e6);
    expect(generate.average_processing_time).toBeGreaterThan(20e6);
  });

  it("$SRV.STATS of the discriminator times its judging", async () => {
    const stats = JSON.parse((await t.nc.request("$SRV.STATS.hadis-discriminator", new Uint8Array(), { timeout: 2_000 })).string());
    const judge = stats.endpoints.find((e: { name: string }) => e.name === "judge");
    expect(judge.num_requests).toBeGreaterThanOrEqual(4);
    expect(judge.num_errors).toBe(0);
    // The profile judge waits its profiled latency × the time scale for each image.
    expect(judge.average_processing_time).toBeGreaterThan(1e6);
  });
});
