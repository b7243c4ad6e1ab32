import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Packr } from "msgpackr";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { newHeaders } from "../../services/nats/connection.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem({ workers: 2 });
});
afterAll(async () => {
  await t?.stop();
});

const packr = new Packr({ useRecords: false });
const pack = (v: unknown) => packr.pack(v);
const json = (s: string) => new TextEncoder().encode(s);

interface Case {
  name: string;
  payload: Uint8Array;
  json?: boolean;
  code: string;
  status: number;
}

const cases: Case[] = [
  { name: "malformed msgpack (reserved byte 0xc1)", payload: new Uint8Array([0xc1, 0xc1, 0xc1]), code: "malformed_payload", status: 400 },
  {
    name: "truncated msgpack",
    payload: pack({ prompt: "a red bicycle on a hill" }).subarray(0, 10),
    code: "malformed_payload",
    status: 400,
  },
  { name: "empty payload", payload: new Uint8Array(0), code: "malformed_payload", status: 400 },
  { name: "malformed JSON", payload: json('{"prompt": "a cat",'), json: true, code: "malformed_payload", status: 400 },
  { name: "msgpack that is not a map", payload: pack([1, 2, 3]), code: "invalid_request", status: 400 },
  { name: "missing prompt", payload: pack({ seed: 3 }), code: "invalid_request", status: 400 },
  { name: "empty prompt after trimming", payload: pack({ prompt: " \n\t " }), code: "invalid_request", status: 400 },
  { name: "100,000-character prompt", payload: pack({ prompt: "a".repeat(100_000) }), code: "prompt_too_long", status: 413 },
  { name: "prompt of the wrong type", payload: pack({ prompt: 42 }), code: "invalid_request", status: 400 },
  { name: "seed of the wrong type", payload: pack({ prompt: "a cat", seed: "seven" }), code: "invalid_request", status: 400 },
  { name: "negative deadline", payload: pack({ prompt: "a cat", deadlineMs: -5 }), code: "invalid_request", status: 400 },
  { name: "unknown field", payload: pack({ prompt: "a cat", colour: "red" }), code: "invalid_request", status: 400 },
  { name: "unknown field in JSON", payload: json('{"prompt":"a cat","x":1}'), json: true, code: "invalid_request", status: 400 },
  { name: "unsupported protocol version", payload: pack({ v: 99, prompt: "a cat" }), code: "unsupported_version", status: 400 },
  // Error messages quote what was sent: a CR or LF in it must not reach the error header.
  {
    name: "a protocol version with a line break",
    payload: json('{"prompt":"a cat","v":"1\\n"}'),
    json: true,
    code: "unsupported_version",
    status: 400,
  },
  {
    name: "an unknown field whose name has line breaks",
    payload: pack({ prompt: "a cat", "a\r\nb": 1 }),
    code: "invalid_request",
    status: 400,
  },
  { name: "deadline too short to meet", payload: pack({ prompt: "a cat", deadlineMs: 1 }), code: "deadline_exceeded", status: 504 },
];

describe("bad input on hadis.generate", () => {
  for (const c of cases) {
    it(`${c.name} → ${c.code}, then the next good request is served`, async () => {
      const h = newHeaders();
      if (c.json) h.set("Content-Type", "application/json");
      // Three sends: every one must be refused the same way; the median must be under 100 ms
      // (one scheduling hiccup on a loaded 2-core runner should not decide the test).
      const timings: number[] = [];
      let msg!: Awaited<ReturnType<typeof t.nc.request>>;
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        msg = await t.nc.request("hadis.generate", c.payload, { timeout: 2_000, headers: h });
        timings.push(performance.now() - started);
        expect(msg.headers?.get("Nats-Service-Error-Code")).toBe(String(c.status));
      }
      expect(timings.sort((a, b) => a - b)[1]).toBeLessThan(100);
      expect(msg.headers?.get("Nats-Service-Error-Code")).toBe(String(c.status));
      expect(msg.headers?.get("Nats-Service-Error")).toMatch(new RegExp(`^${c.code}: `));
      const body = c.json ? JSON.parse(new TextDecoder().decode(msg.data)) : packr.unpack(msg.data);
      expect(body.v).toBe(1);
      expect(body.error.code).toBe(c.code);
      expect(body.error.status).toBe(c.status);
      expect(typeof body.error.message).toBe("string");
      const good = await t.client.generate({ prompt: "a red bicycle", deadlineMs: 20_000 });
      expect(good.image.byteLength).toBeGreaterThan(0);
    });
  }

  it("counts a prompt's characters, not its UTF-16 units: 2,000 emoji are served end to end, 2,001 refused as 2001 characters", async () => {
    const emoji = "\u{1F431}"; // two UTF-16 units
    const served = await t.client.generate({ prompt: emoji.repeat(2_000), deadlineMs: 20_000 });
    expect(served.image.byteLength).toBeGreaterThan(0);
    const msg = await t.nc.request("hadis.generate", pack({ prompt: emoji.repeat(2_001) }), { timeout: 2_000 });
    expect(packr.unpack(msg.data).error).toMatchObject({
      code: "prompt_too_long",
      message: "prompt has 2001 characters; the limit is 2000",
    });
  });

  it("a field of megabytes quoted in the error (a protocol version, an unknown key) still gets its typed reply, cut short", async () => {
    // 4.5 MB of 8 MB max_payload: an error quoting it in full, header and body, would not fit.
    const huge = "x".repeat(4_500_000);
    for (const [payload, code] of [
      [pack({ v: huge, prompt: "a cat" }), "unsupported_version"],
      [pack({ prompt: "a cat", [huge]: 1 }), "invalid_request"],
    ] as const) {
      const msg = await t.nc.request("hadis.generate", payload, { timeout: 5_000 });
      expect(msg.headers?.get("Nats-Service-Error-Code")).toBe("400");
      const body = packr.unpack(msg.data);
      expect(body.error.code).toBe(code);
      expect(body.error.message.length).toBeLessThan(1_100);
      expect(msg.data.length).toBeLessThan(2_000);
    }
    const judged = await t.nc.request(
      "hadis.judge",
      pack({
        v: huge,
        requestId: "r1",
        prompt: "a cat",
        model: "sd35-large-turbo",
        image: new Uint8Array([137, 80, 78, 71]),
        planEpoch: 1,
      }),
      { timeout: 5_000 },
    );
    expect(packr.unpack(judged.data).error.code).toBe("unsupported_version");
    const good = await t.client.generate({ prompt: "a red bicycle", deadlineMs: 20_000 });
    expect(good.image.byteLength).toBeGreaterThan(0);
  });

  it("counts the errors in $SRV.STATS and keeps serving", async () => {
    const msg = await t.nc.request("$SRV.STATS.hadis-router", new Uint8Array(), { timeout: 2_000 });
    const stats = JSON.parse(new TextDecoder().decode(msg.data));
    const generate = stats.endpoints.find((e: { name: string }) => e.name === "generate");
    expect(generate.num_requests).toBeGreaterThanOrEqual(4 * cases.length);
    expect(generate.data.errors).toBeGreaterThanOrEqual(3 * cases.length);
    expect(generate.data.errorsByCode.invalid_request).toBeGreaterThanOrEqual(3 * 8);
    expect(generate.data.errorsByCode.malformed_payload).toBeGreaterThanOrEqual(3 * 4);
    expect(generate.data.replied).toBeGreaterThanOrEqual(cases.length);
  });
});

describe("bad input on hadis.judge", () => {
  const judgeRequest = (over: Record<string, unknown>) =>
    pack({
      v: 1,
      requestId: "r1",
      prompt: "a cat",
      model: "sd35-large-turbo",
      image: new Uint8Array([137, 80, 78, 71]),
      planEpoch: 1,
      ...over,
    });
  const ask = async (payload: Uint8Array) => {
    const msg = await t.nc.request("hadis.judge", payload, { timeout: 5_000 });
    return { status: msg.headers?.get("Nats-Service-Error-Code"), body: packr.unpack(msg.data) };
  };

  it("a model not in the pool → unknown_model (404) on field model, a model name past 64 characters → invalid_request", async () => {
    const unknown = await ask(judgeRequest({ model: "sd99-imaginary" }));
    expect(unknown.status).toBe("404");
    expect(unknown.body.error).toMatchObject({ code: "unknown_model", details: { field: "model" } });
    const long = await ask(judgeRequest({ model: "m".repeat(10_000) }));
    expect(long.body.error.code).toBe("invalid_request");
  });

  it("a known model is judged", async () => {
    const ok = await ask(judgeRequest({}));
    expect(ok.status).toBeUndefined();
    expect(typeof ok.body.score).toBe("number");
  });
});
