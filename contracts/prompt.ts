/**
 * The rules of a caller's prompt, owned by the generate request's schema: how characters are
 * counted, what is blank, how long it may be, and which error code each refusal answers with.
 */
import { z } from "zod";

/** Longest prompt accepted, in characters (code points) after trimming. */
export const MAX_PROMPT_CHARS = 2000;

/** A prompt's length in characters: an emoji or another character past U+FFFF counts one (a string's `length` counts it two). */
export function promptChars(prompt: string): number {
  let n = prompt.length;
  for (let i = 0; i < prompt.length - 1; i++) {
    const c = prompt.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = prompt.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** Characters that draw nothing: whitespace, control (NUL, ESC, …) and invisible format characters (zero-width space, BOM, bidi marks). */
const BLANK_PROMPT = /^[\s\p{Cc}\p{Cf}]*$/u;

/** Whether a prompt has nothing a model could draw from: empty, or only whitespace, control and invisible format characters. */
export function isBlankPrompt(prompt: string): boolean {
  return BLANK_PROMPT.test(prompt);
}

/**
 * The error code a refusal of the schema answers with, when it is not `invalid_request`: set as
 * the issue's `params` (`validate` in envelope.ts reads it and answers with the issue's message).
 */
export interface RefusalParams {
  errorCode: "invalid_request" | "prompt_too_long";
}

/** Refuses `text` of `field` when it has more than `MAX_PROMPT_CHARS` characters (code points): `prompt_too_long`. */
export function refuseLongText(field: string, text: string, ctx: z.RefinementCtx): void {
  const chars = promptChars(text);
  if (chars > MAX_PROMPT_CHARS) {
    ctx.addIssue({
      code: "custom",
      message: `${field} has ${chars} characters; the limit is ${MAX_PROMPT_CHARS}`,
      params: { errorCode: "prompt_too_long" } satisfies RefusalParams,
    });
  }
}

/**
 * A caller's prompt, every rule of it: trimmed; empty, or only whitespace, control or invisible
 * characters, is `invalid_request`; more than `MAX_PROMPT_CHARS` characters, `prompt_too_long`.
 */
export const CallerPromptSchema = z
  .string()
  .trim()
  .superRefine((prompt, ctx) => {
    if (isBlankPrompt(prompt)) {
      const message = prompt.length === 0 ? "prompt is empty" : "prompt is empty: it has only whitespace, control or invisible characters";
      ctx.addIssue({ code: "custom", message, params: { errorCode: "invalid_request" } satisfies RefusalParams });
    } else refuseLongText("prompt", prompt, ctx);
  });
