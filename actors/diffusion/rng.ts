/**
 * A seeded, platform-independent Gaussian source for initial latents and ancestral noise:
 * mulberry32 uniforms turned into normals by Box–Muller. Same seed, same numbers, on every
 * machine (the values differ from torch's generator; reproducibility is within HADIS-TS).
 */

/** Deterministic standard-normal generator for one image. */
export class GaussianRng {
  private state: number;
  private spare: number | undefined;

  /** `seed` is reduced to 32 bits; any integer (or float) is accepted. */
  constructor(seed: number) {
    this.state = (Math.trunc(seed) ^ 0x9e3779b9) >>> 0;
  }

  /** Uniform in (0, 1): mulberry32, never exactly 0 so `log` stays finite. */
  uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  }

  /** One standard normal sample. */
  normal(): number {
    if (this.spare !== undefined) {
      const value = this.spare;
      this.spare = undefined;
      return value;
    }
    const r = Math.sqrt(-2 * Math.log(this.uniform()));
    const theta = 2 * Math.PI * this.uniform();
    this.spare = r * Math.sin(theta);
    return r * Math.cos(theta);
  }

  /** `count` standard normals, each multiplied by `scale`. */
  normals(count: number, scale = 1): Float32Array {
    const out = new Float32Array(count);
    for (let i = 0; i < count; i++) out[i] = this.normal() * scale;
    return out;
  }
}

/** Classifier-free guidance: `uncond + scale · (cond − uncond)`, elementwise. */
export function combineGuidance(uncond: Float32Array, cond: Float32Array, scale: number): Float32Array {
  if (uncond.length !== cond.length) throw new Error("guidance: uncond and cond lengths differ");
  const out = new Float32Array(cond.length);
  for (let i = 0; i < cond.length; i++) out[i] = uncond[i] + scale * (cond[i] - uncond[i]);
  return out;
}

/**
 * The guidance-scale embedding some distilled (LCM) UNets take as `timestep_cond`
 * (diffusers `get_guidance_scale_embedding` of w − 1): sin then cos features.
 */
export function guidanceScaleEmbedding(guidanceScale: number, dim: number): Float32Array {
  const w = (guidanceScale - 1) * 1000;
  const half = dim / 2;
  const factor = Math.log(10000) / (half - 1);
  const out = new Float32Array(dim);
  for (let i = 0; i < half; i++) {
    const arg = w * Math.exp(-factor * i);
    out[i] = Math.sin(arg);
    out[half + i] = Math.cos(arg);
  }
  return out;
}
