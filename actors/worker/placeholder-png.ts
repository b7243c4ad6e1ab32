/** A small valid PNG standing in for an image in profile mode: one colour per model. */
import { fnv1a } from "../profile/stats.ts";
import { encodePng } from "../diffusion/png.ts";

/** Side of the placeholder image, in pixels. */
export const PLACEHOLDER_SIDE = 16;
const cache = new Map<string, Uint8Array>();

/** The placeholder PNG of a model, `width`×`height` pixels (16×16 by default; cached). */
export function placeholderPng(model: string, width = PLACEHOLDER_SIDE, height = PLACEHOLDER_SIDE): Uint8Array {
  const key = `${model}\n${width}x${height}`;
  let png = cache.get(key);
  if (!png) {
    const h = fnv1a(model);
    const rgb = new Uint8Array(width * height * 3);
    for (let i = 0; i < rgb.length; i += 3) {
      rgb[i] = h & 0xff;
      rgb[i + 1] = (h >>> 8) & 0xff;
      rgb[i + 2] = (h >>> 16) & 0xff;
    }
    png = encodePng({ width, height, pixels: rgb });
    cache.set(key, png);
  }
  return png;
}
