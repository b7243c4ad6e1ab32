import { describe, expect, it } from "vitest";
import { decode, encode, encodeJson, parseRaw, validate } from "../../contracts/envelope.ts";
import { fromWireError, HadisError, isWireError, MAX_ERROR_TEXT, toWireError } from "../../contracts/errors.ts";
import { GenerateRequestSchema, PlanSchema, promptChars, PROTOCOL_VERSION, WorkItemSchema } from "../../contracts/messages.ts";

describe("envelope", () => {
  it("round-trips a work item through msgpack with its bytes intact", () => {
    const item = {
      v: PROTOCOL_VERSION,
      requestId: "r1",
      stage: "light",
      prompt: "a cat",
      seed: 3,
      model: "m1",
      replyTo: "hadis.result.r",
      enqueuedAtMs: 1,
      deadlineAtMs: 2,
      planEpoch: 4,
    };
    expect(decode(WorkItemSchema, encode(item), "work item")).toEqual(item);
  });

  it("JSON encodes bytes as base64", () => {
    const text = new TextDecoder().decode(encodeJson({ image: new Uint8Array([1, 2, 3]) }));
    expect(JSON.parse(text).image).toBe("AQID");
  });

  it("types malformed payloads, schema errors and version mismatches", () => {
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return (e as HadisError).code;
      }
      return "none";
    };
    expect(code(() => parseRaw(new Uint8Array([0xc1])))).toBe("malformed_payload");
    expect(code(() => parseRaw(new TextEncoder().encode("{"), "json"))).toBe("malformed_payload");
    expect(code(() => parseRaw(new Uint8Array()))).toBe("malformed_payload");
    expect(code(() => validate(GenerateRequestSchema, { prompt: 1 }, "req"))).toBe("invalid_request");
    expect(code(() => validate(GenerateRequestSchema, { v: 2, prompt: "x" }, "req"))).toBe("unsupported_version");
    expect(code(() => validate(PlanSchema, { v: PROTOCOL_VERSION }, "plan"))).toBe("invalid_request");
  });

  it("names the field at fault", () => {
    let thrown: unknown;
    try {
      validate(GenerateRequestSchema, { prompt: "x", seed: -1 }, "req");
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(HadisError);
    expect((thrown as HadisError).details.field).toBe("seed");
  });

  it("names an unknown field, and says what it refuses once", () => {
    const refusal = (value: unknown) => {
      try {
        validate(GenerateRequestSchema, value, "generate request");
      } catch (e) {
        return e as HadisError;
      }
      throw new Error("accepted");
    };
    const unknown = refusal({ prompt: "x", deadlineMS: 5 });
    expect(unknown.message).toBe('generate request: unknown field "deadlineMS"');
    expect(unknown.details.field).toBe("deadlineMS");
    const two = refusal({ prompt: "x", a: 1, b: 2 });
    expect(two.message).toBe('generate request: unknown fields "a", "b"');
    expect(two.details.field).toBe("a");
    const list = refusal([]);
    expect(list.message).toBe("generate request: Invalid input: expected object, received array");
    expect(list.details.field).toBeUndefined();
  });
});

describe("errors", () => {
  it("round-trips a typed error through its wire body", () => {
    const err = new HadisError("overloaded", "too busy", { retryAfterMs: 250 });
    const wire = toWireError(err, PROTOCOL_VERSION);
    expect(wire.error).toMatchObject({ code: "overloaded", status: 503, retryable: true, details: { retryAfterMs: 250 } });
    expect(isWireError(wire)).toBe(true);
    const back = fromWireError(wire);
    expect(back).toBeInstanceOf(HadisError);
    expect([back.code, back.message, back.retryable, back.details.retryAfterMs]).toEqual(["overloaded", "too busy", true, 250]);
  });

  it("turns unknown throwables into internal errors and unknown codes into internal", () => {
    expect(toWireError(new Error("boom"), 1).error.code).toBe("internal");
    expect(fromWireError({ v: 1, error: { code: "nope" as never, status: 500, message: "m", retryable: false } }).code).toBe("internal");
    for (const inherited of ["toString", "constructor", "__proto__", "hasOwnProperty"]) {
      const back = fromWireError({ v: 1, error: { code: inherited as never, status: 500, message: "m", retryable: false } });
      expect(back.code).toBe("internal");
      expect(back.status).toBe(500);
    }
    expect(isWireError({ error: "x" })).toBe(false);
  });

  it("cuts messages and string details that quote megabytes, and reads only plain facts from another process's details", () => {
    const huge = "x".repeat(4_000_000);
    const e = (() => {
      try {
        return validate(GenerateRequestSchema, { v: huge, prompt: "a cat" }, "generate request");
      } catch (err) {
        return err as HadisError;
      }
    })() as HadisError;
    expect(e.code).toBe("unsupported_version");
    expect(e.message.length).toBeLessThan(MAX_ERROR_TEXT + 50);
    expect(e.message).toMatch(/… \(\d+ more characters\)$/);
    const keyed = (() => {
      try {
        return validate(GenerateRequestSchema, { prompt: "a cat", [huge]: 1 }, "generate request");
      } catch (err) {
        return err as HadisError;
      }
    })() as HadisError;
    expect(keyed.code).toBe("invalid_request");
    expect(keyed.message.length).toBeLessThan(MAX_ERROR_TEXT + 50);
    const given = { field: huge };
    expect(new HadisError("invalid_request", "m", given).details.field!.length).toBeLessThan(MAX_ERROR_TEXT + 50);
    expect(given.field).toBe(huge); // the caller's object is left as it was
    const back = fromWireError({
      v: 1,
      error: {
        code: "generation_failed",
        status: 500,
        message: huge,
        retryable: true,
        details: { field: "prompt", retryAfterMs: 5, blob: { deep: [huge] } },
      },
    });
    expect(back.message.length).toBeLessThan(MAX_ERROR_TEXT + 50);
    expect(back.details).toEqual({ field: "prompt", retryAfterMs: 5 });
  });
});

describe("promptChars", () => {
  it("counts characters: a pair of surrogates is one, a lone surrogate one", () => {
    expect(promptChars("a cat")).toBe(5);
    expect(promptChars("\u{1F431} cat")).toBe(5);
    expect(promptChars("\u{1F431}".repeat(1_500))).toBe(1_500);
    expect(promptChars("\ud83d")).toBe(1);
    expect(promptChars("\udc31\ud83d")).toBe(2);
    expect(promptChars("")).toBe(0);
  });
});
