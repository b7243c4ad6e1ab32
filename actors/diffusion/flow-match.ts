/**
 * Flow-matching Euler (diffusers' `FlowMatchEulerDiscreteScheduler`), the scheduler of SD3 and
 * SD3.5: the transformer predicts a velocity, and a step moves the latents along it from one
 * sigma to the next, x ← x + (σₙₑₓₜ − σ)·v, down to σ = 0. Sigmas are shifted toward the noisy end
 * (σ' = s·σ / (1 + (s − 1)·σ), `shift`, 3.0 for SD3/SD3.5); the model's timestep is σ·1000.
 */
import { SchedulerKind, type Scheduler, type SchedulerConfig } from "./scheduler-types.ts";
import { refusedOptions, type RefusalTable } from "./refused-options.ts";
import { ModelExportError } from "../../contracts/errors.ts";

/** The class name in `scheduler_config.json`. */
export const FLOW_MATCH_EULER = SchedulerKind.FlowMatchEuler;

/** The fields of a flow-matching `scheduler_config.json` read here (diffusers' defaults apply). */
export interface FlowMatchConfig extends SchedulerConfig {
  shift?: number;
  /** Read only to refuse a value other than their default (see FLOW_UNIMPLEMENTED). */
  use_dynamic_shifting?: boolean;
  invert_sigmas?: boolean;
  shift_terminal?: number | null;
  stochastic_sampling?: boolean;
  time_shift_type?: string;
}

/**
 * Options that change the sampling and are not implemented here, at a value other than their
 * default: dynamic shifting (Flux, SD3 at other resolutions: a shift from the image size), inverted
 * or terminal-stretched sigmas, stochastic sampling, and the sigma schedules shared with Euler.
 */
const FLOW_UNIMPLEMENTED: RefusalTable<FlowMatchConfig> = {
  use_dynamic_shifting: (v) => v === true,
  invert_sigmas: (v) => v === true,
  shift_terminal: (v) => v !== undefined && v !== null && v !== 0,
  stochastic_sampling: (v) => v === true,
  time_shift_type: (v) => v !== undefined && v !== "exponential",
};

/** `shift·σ / (1 + (shift − 1)·σ)`: the schedule moved toward high noise. */
function shifted(sigma: number, shift: number): number {
  return (shift * sigma) / (1 + (shift - 1) * sigma);
}

/**
 * The sigmas of `steps` steps and a final 0, as diffusers computes them: the training schedule's
 * ends (σ = 1 and the shifted 1/N, in float32), spaced linearly in timesteps, divided by N and
 * shifted again (diffusers shifts the already shifted smallest sigma a second time; so does this,
 * or the last step would differ from theirs), then rounded to float32.
 */
export function flowMatchSigmas(config: FlowMatchConfig, steps: number): number[] {
  const n = config.num_train_timesteps ?? 1000;
  const shift = config.shift ?? 1;
  const f = Math.fround;
  // In __init__, in float32: sigmas = t / N over t = N … 1, shifted; their ends bound the schedule.
  const sigmaMax = f(shifted(f(n / n), shift));
  const sigmaMin = f(shifted(f(1 / n), shift));
  const from = sigmaMax * n;
  const to = sigmaMin * n;
  const sigmas: number[] = [];
  for (let i = 0; i < steps; i++) {
    // numpy's linspace: start + i·step, the last value exactly `stop`.
    const t = steps === 1 ? from : i === steps - 1 ? to : from + i * ((to - from) / (steps - 1));
    sigmas.push(f(shifted(t / n, shift)));
  }
  sigmas.push(0);
  return sigmas;
}

/** Flow-matching Euler for `steps` steps. */
export function flowMatchScheduler(config: FlowMatchConfig, steps: number): Scheduler {
  if (!Number.isInteger(steps) || steps < 1) throw new ModelExportError(`scheduler: steps must be a whole number from 1 (got ${steps})`);
  const refused = refusedOptions(config, FLOW_UNIMPLEMENTED);
  if (refused.length > 0) {
    throw new ModelExportError(
      `scheduler: ${refused.join(", ")} change the sampling in ways ${FLOW_MATCH_EULER} here does not implement (the images would differ from diffusers' without any error); set the default or use an export without them`,
    );
  }
  const shift = config.shift ?? 1;
  if (!(shift > 0)) throw new ModelExportError(`scheduler: shift must be positive (got ${shift})`);
  const sigmas = flowMatchSigmas(config, steps);
  const n = config.num_train_timesteps ?? 1000;
  return {
    kind: FLOW_MATCH_EULER,
    timesteps: sigmas.slice(0, steps).map((s) => Math.fround(s * n)),
    initNoiseSigma: 1,
    sigmas,
    scaleModelInput: (sample) => sample,
    step(modelOutput, index, sample) {
      const dt = Math.fround(sigmas[index + 1] - sigmas[index]);
      const out = new Float32Array(sample.length);
      for (let i = 0; i < sample.length; i++) out[i] = sample[i] + Math.fround(dt * modelOutput[i]);
      return out;
    },
  };
}
