/**
 * A batch whose items ask for different generation settings runs as one sub-batch per distinct
 * setting (a denoiser call takes one size, one step count and one guidance scale), in the order
 * their first items come; the images come back in the batch's order.
 */
import type { GenerationOptions } from "../../contracts/messages.ts";
import type { GeneratedImage, GenerationInput } from "./backend.ts";

/** A stable key of a set of settings (the same settings in any key order give the same key). */
export function optionsKey(options: GenerationOptions | undefined): string {
  if (!options) return "";
  return JSON.stringify(
    Object.keys(options)
      .sort()
      .filter((k) => options[k as keyof GenerationOptions] !== undefined)
      .map((k) => [k, options[k as keyof GenerationOptions]]),
  );
}

/** Runs `batch` as one `run` per distinct settings, one after another; the images in the batch's order. */
export async function runInOptionGroups(
  batch: readonly GenerationInput[],
  run: (options: GenerationOptions | undefined, part: readonly GenerationInput[]) => Promise<GeneratedImage[]>,
): Promise<GeneratedImage[]> {
  const groups = new Map<string, number[]>();
  batch.forEach((input, i) => {
    const key = optionsKey(input.options);
    const indexes = groups.get(key);
    if (indexes) indexes.push(i);
    else groups.set(key, [i]);
  });
  const out: GeneratedImage[] = new Array(batch.length);
  for (const indexes of groups.values()) {
    const part = indexes.map((i) => batch[i]);
    const images = await run(part[0].options, part);
    if (images.length !== part.length) throw new Error(`a sub-batch of ${part.length} made ${images.length} images`);
    indexes.forEach((i, k) => (out[i] = images[k]));
  }
  return out;
}
