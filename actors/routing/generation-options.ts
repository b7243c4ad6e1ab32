/**
 * Per-request generation settings against the models that may serve them: which models a
 * request's `quality` lets serve it under a plan, and whether each setting it gives is one those
 * models support (their profiles' `options`). Pure: the router and the HTTP gateway both call it.
 */
import { HadisError } from "../../contracts/errors.ts";
import { Qualities, type GenerationOptions, type Quality } from "../../contracts/messages.ts";
import type { GenerationRanges } from "../../contracts/profile.ts";
import type { RouteDecision } from "../request/types.ts";

/** A model as the check sees it: its name and the settings its profile supports (none: it takes no settings). */
export interface ModelRanges {
  name: string;
  options?: GenerationRanges | undefined;
}

/** The models of a (light, heavy) pair that may serve a request of `quality`: `fast` the light one, `best` the heavy one, `auto` either. */
export function servingModels(pair: { light: string; heavy: string }, quality: Quality = Qualities.auto): string[] {
  if (quality === Qualities.fast) return [pair.light];
  if (quality === Qualities.best) return [pair.heavy];
  return pair.light === pair.heavy ? [pair.light] : [pair.light, pair.heavy];
}

/** `[w, h]` as `w×h`. */
const sizeText = ([w, h]: readonly [number, number]) => `${w}x${h}`;

/** Why `options` do not fit one model (the field at fault and the reason), or null when they fit. */
export function misfit(options: GenerationOptions, model: ModelRanges): { field: string; reason: string } | null {
  const asked = (["width", "height", "steps", "guidanceScale"] as const).filter((k) => options[k] !== undefined);
  if (asked.length === 0) return null;
  const ranges = model.options;
  if (!ranges) return { field: asked[0], reason: `${model.name} takes no ${asked[0]} (its profile lists no generation options)` };
  if (options.width !== undefined && options.height !== undefined) {
    if (!ranges.sizes.some(([w, h]) => w === options.width && h === options.height)) {
      return {
        field: "width",
        reason: `${options.width}x${options.height} is not a size ${model.name} makes (${ranges.sizes.map(sizeText).join(", ")})`,
      };
    }
  }
  for (const key of ["steps", "guidanceScale"] as const) {
    const value = options[key];
    const range = ranges[key];
    if (value !== undefined && (value < range.min || value > range.max)) {
      return { field: key, reason: `${key} ${value} is outside ${model.name}'s range ${range.min} to ${range.max}` };
    }
  }
  return null;
}

/**
 * Throws `invalid_request` (naming the field) unless every model that may serve the request
 * supports the settings it gives. With `auto` both models of the pair may serve it, so a setting
 * only one supports is refused with a hint to pin that one.
 */
export function checkGenerationOptions(
  options: GenerationOptions,
  quality: Quality | undefined,
  pair: { light: string; heavy: string },
  rangesOf: (model: string) => ModelRanges,
): void {
  const models = servingModels(pair, quality);
  for (const name of models) {
    const bad = misfit(options, rangesOf(name));
    if (!bad) continue;
    const others = models.length > 1 ? models.filter((m) => m !== name && !misfit(options, rangesOf(m))) : [];
    const hint =
      models.length > 1
        ? others.length > 0
          ? `; with quality "auto" either ${pair.light} (light) or ${pair.heavy} (heavy) may serve it: ask for quality "${others[0] === pair.heavy ? "best" : "fast"}" to have ${others[0]} serve it`
          : `; with quality "auto" either ${pair.light} (light) or ${pair.heavy} (heavy) of the plan in force may serve it`
        : ` (the ${quality === Qualities.fast ? "light " : quality === Qualities.best ? "heavy " : ""}model of the plan in force)`;
    throw new HadisError("invalid_request", `${bad.reason}${hint}`, { field: bad.field, model: name });
  }
}

/**
 * A routing decision with the caller's `quality` applied: `fast` serves the light model's image
 * unjudged (nothing to escalate to), `best` sends the prompt straight to the heavy model; `auto`
 * leaves the decision as the policy made it.
 */
export function withQuality(decision: RouteDecision, quality: Quality | undefined): RouteDecision {
  if (quality === Qualities.fast) return { ...decision, hard: false, skipJudge: true };
  if (quality === Qualities.best) return { ...decision, hard: true };
  return decision;
}
