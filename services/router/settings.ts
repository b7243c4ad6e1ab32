/** A generate request's generation settings and quality, checked at the router's intake. */
import { generationOptionsOf, type GenerateRequest, type GenerationOptions, type Plan, type Quality } from "../../contracts/messages.ts";
import { checkGenerationOptions, type ModelRanges } from "../../actors/routing/generation-options.ts";

/**
 * The settings a request gives (undefined when none) and its quality (undefined for `auto`),
 * refused with a typed error when, under the plan in force, a model that may serve the request
 * does not support them (checked again at routing, under the plan routing goes by). The schema
 * has checked the rest, the negative prompt's length too. Nothing is queued before this passes.
 */
export function askedSettings(
  request: GenerateRequest,
  plan: Plan | null,
  rangesOf: (model: string) => ModelRanges,
): { options?: GenerationOptions; quality?: Quality } {
  const quality = request.quality === "auto" ? undefined : request.quality;
  const given = generationOptionsOf(request);
  const options = Object.keys(given).length > 0 ? given : undefined;
  if (options && plan) checkGenerationOptions(options, quality, plan.pair, rangesOf);
  return { ...(options ? { options } : {}), ...(quality ? { quality } : {}) };
}
