/**
 * What a diffusion scheduler is, apart from the schedulers themselves: the families, the fields of
 * `scheduler_config.json` they read, and the interface the denoising loop drives. `scheduler.ts`
 * (Euler, DDIM, LCM) and `flow-match.ts` (SD3) both implement it.
 */

/** The scheduler families implemented in scheduler.ts and flow-match.ts. */
export const SchedulerKind = {
  EulerDiscrete: "EulerDiscreteScheduler",
  EulerAncestral: "EulerAncestralDiscreteScheduler",
  Ddim: "DDIMScheduler",
  Lcm: "LCMScheduler",
  /** SD3/SD3.5: only for flow-matching models (flow-match.ts). */
  FlowMatchEuler: "FlowMatchEulerDiscreteScheduler",
} as const;
/** One scheduler family. */
export type SchedulerKind = (typeof SchedulerKind)[keyof typeof SchedulerKind];

/** The fields of `scheduler_config.json` these schedulers read (diffusers defaults apply). */
export interface SchedulerConfig {
  _class_name?: string;
  num_train_timesteps?: number;
  beta_start?: number;
  beta_end?: number;
  beta_schedule?: string;
  prediction_type?: string;
  timestep_spacing?: string;
  steps_offset?: number;
  set_alpha_to_one?: boolean;
  /** DDIM: clamp the predicted x0 to ±clip_sample_range (diffusers' default: true, 1). */
  clip_sample?: boolean;
  clip_sample_range?: number;
  /** Read only to refuse a value other than their default (see UNIMPLEMENTED). */
  use_karras_sigmas?: boolean;
  use_exponential_sigmas?: boolean;
  use_beta_sigmas?: boolean;
  rescale_betas_zero_snr?: boolean;
  thresholding?: boolean;
  timestep_type?: string;
  interpolation_type?: string;
  final_sigmas_type?: string;
  original_inference_steps?: number;
  timestep_scaling?: number;
}

/** A configured schedule for a fixed number of steps. */
export interface Scheduler {
  readonly kind: SchedulerKind;
  /** The model timestep for each step, in order. */
  readonly timesteps: readonly number[];
  /** Multiplier of unit Gaussian noise for the initial latents. */
  readonly initNoiseSigma: number;
  /** Noise levels per step plus a final 0 (Euler family only). */
  readonly sigmas?: readonly number[];
  /** Scales the denoiser input at step `index` (Euler divides by sqrt(sigma²+1)). */
  scaleModelInput(sample: Float32Array, index: number): Float32Array;
  /**
   * One denoising step from step `index`; `drawNoise` supplies unit Gaussian noise of the
   * sample's length for the stochastic schedulers (ancestral, LCM).
   */
  step(modelOutput: Float32Array, index: number, sample: Float32Array, drawNoise: () => Float32Array): Float32Array;
}
