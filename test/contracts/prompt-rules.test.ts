/** The generate request's schema owns every rule of a prompt: the router and the gateway apply it and nothing else. */
import { describe, expect, it } from "vitest";
import { validate } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import { GenerateRequestSchema } from "../../contracts/messages.ts";

/** The code, field and message a request is refused with (null when accepted). */
function refusal(body: unknown): { code: string; field: unknown; message: string } | null {
  try {
    validate(GenerateRequestSchema, body, "generate request");
    return null;
  } catch (err) {
    if (!(err instanceof HadisError)) throw err;
    return { code: err.code, field: err.details.field, message: err.message };
  }
}

describe("the prompt rules of GenerateRequestSchema", () => {
  it("hands on the prompt trimmed", () => {
    expect(validate(GenerateRequestSchema, { prompt: "  a red bicycle \n" }, "generate request").prompt).toBe("a red bicycle");
  });

  it("refuses an empty prompt, or one of only whitespace, control or invisible characters, as invalid_request on field prompt", () => {
    expect(refusal({ prompt: "" })).toEqual({ code: "invalid_request", field: "prompt", message: "prompt is empty" });
    expect(refusal({ prompt: " \t\n" })).toEqual({ code: "invalid_request", field: "prompt", message: "prompt is empty" });
    expect(refusal({ prompt: "\u200b\u0000\ufeff" })).toEqual({
      code: "invalid_request",
      field: "prompt",
      message: "prompt is empty: it has only whitespace, control or invisible characters",
    });
  });

  it("counts characters, not UTF-16 units: 2,000 emoji pass, 2,001 characters are prompt_too_long", () => {
    expect(refusal({ prompt: "\u{1F431}".repeat(2_000) })).toBeNull();
    expect(refusal({ prompt: ` ${"a".repeat(2_000)} ` })).toBeNull();
    expect(refusal({ prompt: "a".repeat(2_001) })).toEqual({
      code: "prompt_too_long",
      field: "prompt",
      message: "prompt has 2001 characters; the limit is 2000",
    });
    expect(refusal({ prompt: "a".repeat(100_000) })?.code).toBe("prompt_too_long");
  });

  it("applies the length rule to the negative prompt, whatever its size", () => {
    expect(refusal({ prompt: "a cat", negativePrompt: "\u{1F431}".repeat(2_000) })).toBeNull();
    expect(refusal({ prompt: "a cat", negativePrompt: "n".repeat(2_001) })).toEqual({
      code: "prompt_too_long",
      field: "negativePrompt",
      message: "negativePrompt has 2001 characters; the limit is 2000",
    });
    expect(refusal({ prompt: "a cat", negativePrompt: "n".repeat(100_000) })).toMatchObject({
      code: "prompt_too_long",
      field: "negativePrompt",
    });
  });

  it("leaves the other fields' refusals to invalid_request", () => {
    expect(refusal({ prompt: 3 })).toMatchObject({ code: "invalid_request", field: "prompt" });
    expect(refusal({ prompt: "a cat", seed: -1 })).toMatchObject({ code: "invalid_request", field: "seed" });
  });
});
