/** A generate request's generation settings and quality, checked at the router's intake. */
import { HadisError } from "../../contracts/errors.ts";
import { generationOptionsOf, MAX_PROMPT_CHARS, promptChars, type GenerateRequest, type GenerationOptions, type Plan, type Quality } from "../../contracts/messages.ts";
import { checkGenerationOptions, type ModelRanges } from "../../actors/routing/generation-options.ts";

/**
 * The settings a request gives (undefined when none) and its quality (undefined for `auto`),
 * refused with a typed error when a negative prompt is too long or, under the plan in force, a
 * model that may serve the request does not support them (checked again at routing, under the
 * plan routing goes by). Nothing is queued before this passes.
 */
export function askedSettings(request: GenerateRequest, plan: Plan | null, rangesOf: (model: string) => ModelRanges): { options?: GenerationOptions; quality?: Quality } {
  const quality = request.quality === "auto" ? undefined : request.quality;
  const given = generationOptionsOf(request);
  if (given.negativePrompt !== undefined) {
    const chars = promptChars(given.negativePrompt);
    if (chars > MAX_PROMPT_CHARS) throw new HadisError("prompt_too_long", `negativePrompt has ${chars} characters; the limit is ${MAX_PROMPT_CHARS}`, { field: "negativePrompt" });
  }
  const options = Object.keys(given).length > 0 ? given : undefined;
  if (options && plan) checkGenerationOptions(options, quality, plan.pair, rangesOf);
  return { ...(options ? { options } : {}), ...(quality ? { quality } : {}) };
}
