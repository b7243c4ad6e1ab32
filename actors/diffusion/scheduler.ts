/**
 * Diffusion schedulers built from a diffusers `scheduler_config.json`: Euler discrete,
 * Euler ancestral, DDIM and LCM, with the formulas of diffusers' implementations
 * (timestep spacing leading/trailing/linspace, scaled_linear/linear betas,
 * epsilon/v_prediction/sample targets). Latents are flat Float32Arrays (batch-major).
 */

import { FLOW_MATCH_EULER, flowMatchScheduler } from "./flow-match.ts";
import { refusedOptions, type RefusalTable } from "./refused-options.ts";
import { SchedulerKind, type Scheduler, type SchedulerConfig } from "./scheduler-types.ts";
import { ModelExportError } from "../../contracts/errors.ts";

export { SchedulerKind, type Scheduler, type SchedulerConfig };

/** Training schedule: `alphas_cumprod` in float32 as diffusers keeps it. */
export function alphasCumprod(config: SchedulerConfig): Float32Array {
  const n = config.num_train_timesteps ?? 1000;
  const start = config.beta_start ?? 0.0001;
  const end = config.beta_end ?? 0.02;
  const schedule = config.beta_schedule ?? "linear";
  const betas = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const f = n === 1 ? 0 : i / (n - 1);
    if (schedule === "scaled_linear") betas[i] = (Math.sqrt(start) + f * (Math.sqrt(end) - Math.sqrt(start))) ** 2;
    else if (schedule === "linear") betas[i] = start + f * (end - start);
    else throw new ModelExportError(`scheduler: unsupported beta_schedule "${schedule}"`);
  }
  const out = new Float32Array(n);
  let prod = 1;
  for (let i = 0; i < n; i++) {
    prod = Math.fround(prod * Math.fround(1 - betas[i]));
    out[i] = prod;
  }
  return out;
}

/**
 * Rounds half to even, as numpy's `round` does. diffusers rounds timesteps with it, and
 * `Math.round` (ties up) would turn e.g. 812.5 into 813 where diffusers has 812.
 */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  // Math.round sends a tie up; if that lands on an odd integer, the even one is below.
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Timesteps (descending) for `steps` inference steps with the config's `timestep_spacing`. */
export function spacedTimesteps(config: SchedulerConfig, steps: number, defaultSpacing = "leading"): number[] {
  const n = config.num_train_timesteps ?? 1000;
  const spacing = config.timestep_spacing ?? defaultSpacing;
  const offset = config.steps_offset ?? 0;
  if (steps < 1 || steps > n) throw new ModelExportError(`scheduler: steps ${steps} outside 1..${n}`);
  const out: number[] = [];
  if (spacing === "leading") {
    // An integer stride: the products are whole numbers, nothing to round.
    const ratio = Math.floor(n / steps);
    for (let i = steps - 1; i >= 0; i--) out.push(i * ratio + offset);
  } else if (spacing === "trailing") {
    // np.arange(n, 0, -n/steps) computes n + i·delta with delta = (n − ratio) − n; mirroring
    // that float arithmetic keeps ties (812.5) and near-ties identical to diffusers. arange can
    // also yield one extra ≈0 value (timestep −1, e.g. at 61 steps); we keep exactly `steps`.
    const delta = n - n / steps - n;
    for (let i = 0; i < steps; i++) out.push(roundHalfEven(n + i * delta) - 1);
  } else if (spacing === "linspace") {
    // np.linspace(0, n − 1, steps) is i·step with the endpoint set exactly.
    const step = steps === 1 ? 0 : (n - 1) / (steps - 1);
    for (let i = steps - 1; i >= 0; i--) out.push(i === steps - 1 && steps > 1 ? n - 1 : i * step);
  } else {
    throw new ModelExportError(`scheduler: unsupported timestep_spacing "${spacing}"`);
  }
  return out;
}

/** Linear interpolation of a table at fractional index `x` (numpy.interp over 0..len-1). */
function interp(table: ArrayLike<number>, x: number): number {
  if (x <= 0) return table[0];
  if (x >= table.length - 1) return table[table.length - 1];
  const lo = Math.floor(x);
  return table[lo] + (table[lo + 1] - table[lo]) * (x - lo);
}

/** x0 from an epsilon / v / sample prediction at DDPM alpha-bar `alpha`. */
function predictX0(kind: string, out: number, x: number, alpha: number): number {
  const beta = 1 - alpha;
  if (kind === "epsilon") return (x - Math.sqrt(beta) * out) / Math.sqrt(alpha);
  if (kind === "v_prediction") return Math.sqrt(alpha) * x - Math.sqrt(beta) * out;
  return out;
}

function checkPrediction(config: SchedulerConfig): string {
  const kind = config.prediction_type ?? "epsilon";
  if (kind !== "epsilon" && kind !== "v_prediction" && kind !== "sample") {
    throw new ModelExportError(`scheduler: unsupported prediction_type "${kind}"`);
  }
  return kind;
}

/** Euler (and Euler ancestral) over Karras-style sigmas interpolated at the timesteps. */
export function eulerScheduler(config: SchedulerConfig, steps: number, ancestral: boolean): Scheduler {
  const prediction = checkPrediction(config);
  const ac = alphasCumprod(config);
  const trainSigmas = Float32Array.from(ac, (a) => Math.sqrt((1 - a) / a));
  const spacing = config.timestep_spacing ?? "linspace";
  const timesteps = spacedTimesteps(config, steps, "linspace");
  const sigmas = [...timesteps.map((t) => Math.fround(interp(trainSigmas, t))), 0];
  const maxSigma = Math.max(...sigmas);
  const initNoiseSigma = spacing === "linspace" || spacing === "trailing" ? maxSigma : Math.sqrt(maxSigma ** 2 + 1);
  return {
    kind: ancestral ? SchedulerKind.EulerAncestral : SchedulerKind.EulerDiscrete,
    timesteps,
    initNoiseSigma,
    sigmas,
    scaleModelInput(sample, index) {
      const scale = 1 / Math.sqrt(sigmas[index] ** 2 + 1);
      return Float32Array.from(sample, (v) => v * scale);
    },
    step(modelOutput, index, sample, drawNoise) {
      const sigma = sigmas[index];
      const next = sigmas[index + 1];
      let down = next;
      let up = 0;
      if (ancestral) {
        up = Math.sqrt((next ** 2 * (sigma ** 2 - next ** 2)) / sigma ** 2);
        down = Math.sqrt(next ** 2 - up ** 2);
      }
      const dt = down - sigma;
      const noise = up > 0 ? drawNoise() : undefined;
      const out = new Float32Array(sample.length);
      const c = 1 / Math.sqrt(sigma ** 2 + 1);
      for (let i = 0; i < sample.length; i++) {
        const x = sample[i];
        const m = modelOutput[i];
        let x0: number;
        if (prediction === "epsilon") x0 = x - sigma * m;
        else if (prediction === "v_prediction") x0 = m * (-sigma * c) + x * c * c;
        else x0 = m;
        const derivative = (x - x0) / sigma;
        out[i] = x + derivative * dt + (noise ? noise[i] * up : 0);
      }
      return out;
    },
  };
}

/** DDIM with eta = 0 (deterministic), as diffusers' DDIMScheduler. */
export function ddimScheduler(config: SchedulerConfig, steps: number): Scheduler {
  const prediction = checkPrediction(config);
  const ac = alphasCumprod(config);
  const n = config.num_train_timesteps ?? 1000;
  const finalAlpha = (config.set_alpha_to_one ?? true) ? 1 : ac[0];
  const timesteps = spacedTimesteps(config, steps, "leading").map(roundHalfEven);
  // Leading spacing with steps_offset can reach t = n (e.g. 1000 steps, offset 1), past the
  // alphas table; diffusers fails there too (IndexError in step), so fail before sampling.
  if (timesteps[0] >= n) {
    const offset = config.steps_offset ?? 0;
    throw new ModelExportError(
      `scheduler: DDIM timestep ${timesteps[0]} is past the ${n} training timesteps ` +
        `(steps ${steps}, steps_offset ${offset}); use fewer steps`,
    );
  }
  const stride = Math.floor(n / steps);
  // diffusers clamps the predicted x0 unless the config says `clip_sample: false` (SD's configs do).
  const clip = (config.clip_sample ?? true) ? (config.clip_sample_range ?? 1) : Number.POSITIVE_INFINITY;
  return {
    kind: SchedulerKind.Ddim,
    timesteps,
    initNoiseSigma: 1,
    scaleModelInput: (sample) => sample,
    step(modelOutput, index, sample) {
      const t = timesteps[index];
      const prev = t - stride;
      const alpha = ac[t];
      const alphaPrev = prev >= 0 ? ac[prev] : finalAlpha;
      const out = new Float32Array(sample.length);
      for (let i = 0; i < sample.length; i++) {
        const x = sample[i];
        const m = modelOutput[i];
        const x0 = predictX0(prediction, m, x, alpha);
        const eps =
          prediction === "epsilon"
            ? m
            : prediction === "v_prediction"
              ? Math.sqrt(alpha) * m + Math.sqrt(1 - alpha) * x
              : (x - Math.sqrt(alpha) * x0) / Math.sqrt(1 - alpha);
        // (ε comes from the unclamped x0, as in diffusers.)
        out[i] = Math.sqrt(alphaPrev) * Math.min(Math.max(x0, -clip), clip) + Math.sqrt(1 - alphaPrev) * eps;
      }
      return out;
    },
  };
}

/** Latent consistency (LCM) multistep sampling, as diffusers' LCMScheduler. */
export function lcmScheduler(config: SchedulerConfig, steps: number): Scheduler {
  const prediction = checkPrediction(config);
  const ac = alphasCumprod(config);
  const n = config.num_train_timesteps ?? 1000;
  const original = config.original_inference_steps ?? 50;
  const scaling = config.timestep_scaling ?? 10;
  const finalAlpha = (config.set_alpha_to_one ?? true) ? 1 : ac[0];
  if (steps > original) throw new ModelExportError(`scheduler: LCM steps ${steps} > original_inference_steps ${original}`);
  const k = Math.floor(n / original);
  const origin: number[] = [];
  for (let i = original; i >= 1; i--) origin.push(i * k - 1);
  const timesteps: number[] = [];
  for (let i = 0; i < steps; i++) timesteps.push(origin[Math.floor((i * origin.length) / steps)]);
  const sigmaData = 0.5;
  return {
    kind: SchedulerKind.Lcm,
    timesteps,
    initNoiseSigma: 1,
    scaleModelInput: (sample) => sample,
    step(modelOutput, index, sample, drawNoise) {
      const t = timesteps[index];
      const prev = index + 1 < timesteps.length ? timesteps[index + 1] : t;
      const alpha = ac[t];
      const alphaPrev = prev >= 0 ? ac[prev] : finalAlpha;
      const scaled = t * scaling;
      const cSkip = sigmaData ** 2 / (scaled ** 2 + sigmaData ** 2);
      const cOut = scaled / Math.sqrt(scaled ** 2 + sigmaData ** 2);
      const last = index === timesteps.length - 1;
      const noise = last ? undefined : drawNoise();
      const out = new Float32Array(sample.length);
      for (let i = 0; i < sample.length; i++) {
        const x = sample[i];
        const denoised = cOut * predictX0(prediction, modelOutput[i], x, alpha) + cSkip * x;
        out[i] = noise ? Math.sqrt(alphaPrev) * denoised + Math.sqrt(1 - alphaPrev) * noise[i] : denoised;
      }
      return out;
    },
  };
}

/**
 * Classes with no implementation here that share the DDPM betas and epsilon/v targets, so
 * Euler discrete over the same betas is a fair stand-in (different solver, same model).
 */
const EULER_STAND_IN_CLASSES: readonly string[] = ["PNDMScheduler", "LMSDiscreteScheduler", "DPMSolverMultistepScheduler"];

/**
 * Options of diffusers' schedulers that change the sampling and that these schedulers do not
 * implement, at a value other than their default: refused rather than silently run without.
 */
const UNIMPLEMENTED: RefusalTable<SchedulerConfig> = {
  use_karras_sigmas: (v) => v === true,
  use_exponential_sigmas: (v) => v === true,
  use_beta_sigmas: (v) => v === true,
  rescale_betas_zero_snr: (v) => v === true,
  thresholding: (v) => v === true,
  timestep_type: (v) => v !== undefined && v !== "discrete",
  interpolation_type: (v) => v !== undefined && v !== "linear",
  final_sigmas_type: (v) => v !== undefined && v !== "zero",
};

/** Why a scheduler class cannot run, naming the classes that can. */
function unsupportedClassError(kind: string | undefined): Error {
  const named = kind === undefined ? "no _class_name" : `class "${kind}"`;
  // Flow-matching models predict a velocity over sigmas in [0, 1]; DDPM-beta Euler sigmas would
  // run without error and produce noise, hence the explicit note.
  const flow = kind?.includes("FlowMatch") ? ` Of the flow-matching schedulers only ${FLOW_MATCH_EULER} (SD3, SD3.5) is implemented.` : "";
  return new ModelExportError(
    `scheduler: unsupported scheduler ${named}; supported: ${Object.values(SchedulerKind).join(", ")}` +
      ` (${EULER_STAND_IN_CLASSES.join(", ")} run as ${SchedulerKind.EulerDiscrete}).${flow}`,
  );
}

/**
 * A scheduler for `steps` steps from a parsed `scheduler_config.json`. PNDM, LMS and
 * DPM-Solver (multistep) run as Euler discrete over the same betas; any other class throws
 * unless `override` names one of the implemented kinds.
 */
export function createScheduler(config: SchedulerConfig, steps: number, override?: SchedulerKind): Scheduler {
  const kind = override ?? config._class_name;
  const unimplemented = refusedOptions(config, UNIMPLEMENTED);
  if (unimplemented.length > 0) {
    throw new ModelExportError(
      `scheduler: ${unimplemented.join(", ")} change the sampling in ways these schedulers do not implement (the images would differ from diffusers' without any error); set the default or use an export without them`,
    );
  }
  switch (kind) {
    case SchedulerKind.EulerDiscrete:
      return eulerScheduler(config, steps, false);
    case SchedulerKind.EulerAncestral:
      return eulerScheduler(config, steps, true);
    case SchedulerKind.Ddim:
      return ddimScheduler(config, steps);
    case SchedulerKind.Lcm:
      return lcmScheduler(config, steps);
    case SchedulerKind.FlowMatchEuler:
      return flowMatchScheduler(config, steps);
    default:
      if (kind !== undefined && EULER_STAND_IN_CLASSES.includes(kind)) return eulerScheduler(config, steps, false);
      throw unsupportedClassError(kind);
  }
}
