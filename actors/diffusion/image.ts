/**
 * Pixel conversions around the models: VAE decoder output (NCHW floats in [-1, 1]) to RGB
 * bytes, and CLIP's image preprocessing (as `CLIPImageProcessor`: PIL bicubic resize of the
 * shortest side to 224, center crop 224, rescale 1/255, normalise, CHW float32).
 */
import type { RgbImage } from "./png.ts";

/** CLIP's per-channel normalisation mean. */
export const CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073] as const;
/** CLIP's per-channel normalisation standard deviation. */
export const CLIP_STD = [0.26862954, 0.26130258, 0.27577711] as const;
/** CLIP ViT input side in pixels. */
export const CLIP_IMAGE_SIZE = 224;

/**
 * Image `index` of a VAE decoder output `[B, 3, H, W]` as RGB bytes:
 * `round(clamp(x / 2 + 0.5, 0, 1) · 255)`.
 */
export function vaeOutputToRgb(data: Float32Array, index: number, height: number, width: number): RgbImage {
  const plane = height * width;
  const base = index * 3 * plane;
  const pixels = new Uint8Array(plane * 3);
  for (let c = 0; c < 3; c++) {
    for (let p = 0; p < plane; p++) {
      const v = Math.min(Math.max(data[base + c * plane + p] / 2 + 0.5, 0), 1);
      // diffusers rounds half to even here; for a float32 input the only tie v · 255 can hit
      // is 127.5 (v = 0.5), which both rules round to 128, so Math.round gives the same bytes.
      pixels[p * 3 + c] = Math.round(v * 255);
    }
  }
  return { width, height, pixels };
}

/** PIL's bicubic kernel (a = −0.5). */
function bicubic(x: number): number {
  const a = -0.5;
  const t = Math.abs(x);
  if (t < 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return (((t - 5) * t + 8) * t - 4) * a;
  return 0;
}

/** Per output index: first input index and normalised weights (PIL's `precompute_coeffs`). */
function resampleCoefficients(inSize: number, outSize: number): { start: number; weights: number[] }[] {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const support = 2 * filterScale;
  const coeffs: { start: number; weights: number[] }[] = [];
  for (let i = 0; i < outSize; i++) {
    const center = (i + 0.5) * scale;
    const start = Math.max(Math.trunc(center - support + 0.5), 0);
    const end = Math.min(Math.trunc(center + support + 0.5), inSize);
    const weights: number[] = [];
    let total = 0;
    for (let x = start; x < end; x++) {
      const w = bicubic((x - center + 0.5) / filterScale);
      weights.push(w);
      total += w;
    }
    coeffs.push({ start, weights: weights.map((w) => (total === 0 ? 0 : w / total)) });
  }
  return coeffs;
}

/** Separable bicubic resize of RGB bytes, horizontal pass first, rounding to bytes per pass (as PIL). */
export function resizeBicubic(image: RgbImage, width: number, height: number): RgbImage {
  let current = image;
  if (width !== current.width) {
    const coeffs = resampleCoefficients(current.width, width);
    const out = new Uint8Array(width * current.height * 3);
    for (let y = 0; y < current.height; y++) {
      for (let x = 0; x < width; x++) {
        const { start, weights } = coeffs[x];
        for (let c = 0; c < 3; c++) {
          let sum = 0;
          for (let k = 0; k < weights.length; k++) sum += weights[k] * current.pixels[(y * current.width + start + k) * 3 + c];
          out[(y * width + x) * 3 + c] = Math.min(Math.max(Math.round(sum), 0), 255);
        }
      }
    }
    current = { width, height: current.height, pixels: out };
  }
  if (height !== current.height) {
    const coeffs = resampleCoefficients(current.height, height);
    const out = new Uint8Array(width * height * 3);
    for (let y = 0; y < height; y++) {
      const { start, weights } = coeffs[y];
      for (let x = 0; x < width; x++) {
        for (let c = 0; c < 3; c++) {
          let sum = 0;
          for (let k = 0; k < weights.length; k++) sum += weights[k] * current.pixels[((start + k) * width + x) * 3 + c];
          out[(y * width + x) * 3 + c] = Math.min(Math.max(Math.round(sum), 0), 255);
        }
      }
    }
    current = { width, height, pixels: out };
  }
  return current;
}

/** Longest side over shortest side of an image the judge takes. */
const MAX_CLIP_ASPECT = 16;

/**
 * CLIP pixel values `[3, 224, 224]` (CHW float32) from an RGB image: shortest side to 224
 * (the long side `int(224 · long / short)`), center crop, rescale 1/255, normalise.
 */
export function clipPixelValues(image: RgbImage, size = CLIP_IMAGE_SIZE): Float32Array {
  const short = Math.min(image.width, image.height);
  const long = Math.max(image.width, image.height);
  // The whole image is resized before the crop: a 262144×64 strip (50 kB of PNG) would take a
  // gigabyte and seconds of the judge's one thread. No generated image is that long.
  if (long > MAX_CLIP_ASPECT * short)
    throw new Error(`image of ${image.width}x${image.height}: aspect ratio beyond ${MAX_CLIP_ASPECT}:1, not judged`);
  const longOut = Math.trunc((size * long) / short);
  const [w, h] = image.width <= image.height ? [size, longOut] : [longOut, size];
  const resized = resizeBicubic(image, w, h);
  const top = Math.floor((h - size) / 2);
  const left = Math.floor((w - size) / 2);
  const out = new Float32Array(3 * size * size);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const src = ((top + y) * w + left + x) * 3;
      for (let c = 0; c < 3; c++) {
        out[c * size * size + y * size + x] = (resized.pixels[src + c] / 255 - CLIP_MEAN[c]) / CLIP_STD[c];
      }
    }
  }
  return out;
}
