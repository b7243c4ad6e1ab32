import { describe, expect, it } from "vitest";
import { flowMatchScheduler, flowMatchSigmas } from "../../actors/diffusion/flow-match.ts";
import {
  alphasCumprod,
  createScheduler,
  ddimScheduler,
  eulerScheduler,
  lcmScheduler,
  roundHalfEven,
  SchedulerKind,
  spacedTimesteps,
} from "../../actors/diffusion/scheduler.ts";

/** Stable Diffusion 1.x/2.x training betas (scheduler_config.json of runwayml/stable-diffusion-v1-5). */
const SD = { num_train_timesteps: 1000, beta_start: 0.00085, beta_end: 0.012, beta_schedule: "scaled_linear" };
const noNoise = () => {
  throw new Error("deterministic step drew noise");
};

describe("timesteps", () => {
  it("SD 1.5 Euler, 50 steps, leading spacing, steps_offset 1: 981, 961, …, 1", () => {
    const s = eulerScheduler({ ...SD, timestep_spacing: "leading", steps_offset: 1 }, 50, false);
    expect(s.timesteps).toHaveLength(50);
    expect(s.timesteps.slice(0, 3)).toEqual([981, 961, 941]);
    expect(s.timesteps.at(-1)).toBe(1);
  });

  it("SD-Turbo: trailing spacing, 1 step → [999]; 4 steps → [999, 749, 499, 249]", () => {
    expect(eulerScheduler({ ...SD, timestep_spacing: "trailing" }, 1, false).timesteps).toEqual([999]);
    expect(spacedTimesteps({ ...SD, timestep_spacing: "trailing" }, 4)).toEqual([999, 749, 499, 249]);
  });

  it("LCM, 4 steps from 50 original steps → [999, 759, 499, 259]", () => {
    expect(lcmScheduler(SD, 4).timesteps).toEqual([999, 759, 499, 259]);
    expect(lcmScheduler(SD, 1).timesteps).toEqual([999]);
  });

  it("DDIM leading and linspace spacing", () => {
    expect(ddimScheduler({ ...SD, steps_offset: 1 }, 50).timesteps.slice(0, 3)).toEqual([981, 961, 941]);
    expect(spacedTimesteps({ ...SD, timestep_spacing: "linspace" }, 4)).toEqual([999, 666, 333, 0]);
  });

  // Expected values are numpy's, as diffusers computes them:
  // np.round(np.arange(1000, 0, -1000 / 16)).astype(np.int64) - 1 and np.linspace(0, 999, 7).round().
  it("rounds ties to even as numpy does: trailing 16 steps, DDIM linspace 7 steps", () => {
    expect(spacedTimesteps({ ...SD, timestep_spacing: "trailing" }, 16)).toEqual([
      999, 937, 874, 811, 749, 687, 624, 561, 499, 437, 374, 311, 249, 187, 124, 61,
    ]);
    expect(ddimScheduler({ ...SD, timestep_spacing: "linspace" }, 7).timesteps).toEqual([999, 832, 666, 500, 333, 166, 0]);
    expect([0.5, 1.5, 2.5, 812.5, -0.5, -1.5, 2.4, 2.6].map(roundHalfEven)).toEqual([0, 2, 2, 812, -0, -2, 2, 3]);
  });

  it("trailing spacing keeps exactly `steps` values where np.arange overshoots (61 steps)", () => {
    const t = spacedTimesteps({ ...SD, timestep_spacing: "trailing" }, 61);
    expect(t).toHaveLength(61);
    expect(t.at(-1)).toBe(15);
    // A near-tie that only numpy's n + i·delta arithmetic resolves the diffusers way (48 steps).
    expect(spacedTimesteps({ ...SD, timestep_spacing: "trailing" }, 48).slice(0, 4)).toEqual([999, 978, 957, 936]);
  });

  it("DDIM with leading spacing that would reach t = 1000 is an error, not NaN latents", () => {
    expect(() => ddimScheduler({ ...SD, steps_offset: 1 }, 1000)).toThrow(/DDIM timestep 1000 is past the 1000 training timesteps/);
    expect(ddimScheduler({ ...SD, steps_offset: 0 }, 1000).timesteps[0]).toBe(999);
  });
});

describe("sigmas", () => {
  it("match Stable Diffusion's published range (sigma_max 14.6146, sigma_min 0.0292)", () => {
    const s = eulerScheduler({ ...SD, timestep_spacing: "linspace" }, 50, false);
    expect(s.sigmas?.[0]).toBeCloseTo(14.6146, 3);
    expect(s.sigmas?.at(-2)).toBeCloseTo(0.0292, 4);
    expect(s.sigmas?.at(-1)).toBe(0);
    expect(s.initNoiseSigma).toBeCloseTo(14.6146, 3);
  });

  it("leading spacing scales initial noise by sqrt(sigma_max² + 1)", () => {
    const s = eulerScheduler({ ...SD, timestep_spacing: "leading", steps_offset: 1 }, 50, false);
    const sigma = s.sigmas?.[0] ?? 0;
    expect(s.initNoiseSigma).toBeCloseTo(Math.sqrt(sigma ** 2 + 1), 6);
  });

  it("linear beta schedule differs from scaled_linear", () => {
    const linear = alphasCumprod({ ...SD, beta_schedule: "linear" });
    const scaled = alphasCumprod(SD);
    expect(linear[999]).toBeLessThan(scaled[999]);
    expect(() => alphasCumprod({ ...SD, beta_schedule: "cosine" })).toThrow(/beta_schedule/);
  });
});

describe("steps", () => {
  const x0 = Float32Array.of(0.5, -0.25, 1);
  const eps = Float32Array.of(0.1, 2, -1);

  it("one Euler step to sigma 0 recovers x0 from an epsilon prediction", () => {
    const s = eulerScheduler({ ...SD, timestep_spacing: "trailing" }, 1, false);
    const sigma = s.sigmas?.[0] ?? 0;
    const x = x0.map((v, i) => v + sigma * eps[i]);
    const out = s.step(eps, 0, x, noNoise);
    out.forEach((v, i) => expect(v).toBeCloseTo(x0[i], 4));
  });

  it("one Euler step recovers x0 from a v prediction", () => {
    const s = eulerScheduler({ ...SD, timestep_spacing: "trailing", prediction_type: "v_prediction" }, 1, false);
    const sigma = s.sigmas?.[0] ?? 0;
    const a = 1 / (sigma ** 2 + 1);
    const x = x0.map((v, i) => v + sigma * eps[i]);
    const v = x0.map((v0, i) => Math.sqrt(a) * eps[i] - Math.sqrt(1 - a) * v0);
    const out = s.step(v, 0, x, noNoise);
    out.forEach((value, i) => expect(value).toBeCloseTo(x0[i], 4));
  });

  it("DDIM (set_alpha_to_one) lands on x0 in one step; scale_model_input is identity", () => {
    const s = ddimScheduler({ ...SD, set_alpha_to_one: true }, 1);
    const alpha = alphasCumprod(SD)[s.timesteps[0]];
    const x = x0.map((v, i) => Math.sqrt(alpha) * v + Math.sqrt(1 - alpha) * eps[i]);
    expect(s.scaleModelInput(x, 0)).toBe(x);
    s.step(eps, 0, x, noNoise).forEach((v, i) => expect(v).toBeCloseTo(x0[i], 4));
  });

  it("DDIM clamps the predicted x0 as diffusers does: to ±1 unless the config says clip_sample false, or to clip_sample_range", () => {
    const far = Float32Array.of(2, -3, 0.5);
    const land = (config: Record<string, unknown>) => {
      const s = ddimScheduler({ ...SD, set_alpha_to_one: true, ...config }, 1);
      const alpha = alphasCumprod(SD)[s.timesteps[0]];
      const x = far.map((v, i) => Math.sqrt(alpha) * v + Math.sqrt(1 - alpha) * eps[i]);
      return [...s.step(eps, 0, x, noNoise)].map((v) => Math.round(v * 1e4) / 1e4);
    };
    expect(land({})).toEqual([1, -1, 0.5]); // diffusers' default
    expect(land({ clip_sample: false })).toEqual([2, -3, 0.5]); // SD's scheduler configs
    expect(land({ clip_sample: true, clip_sample_range: 2.5 })).toEqual([2, -2.5, 0.5]);
  });

  it("LCM draws noise between steps but not on the last one", () => {
    const s = lcmScheduler(SD, 2);
    let draws = 0;
    const noise = () => {
      draws++;
      return new Float32Array(3);
    };
    s.step(eps, 0, x0, noise);
    expect(draws).toBe(1);
    s.step(eps, 1, x0, noise);
    expect(draws).toBe(1);
  });

  it("Euler ancestral adds noise; plain Euler does not", () => {
    const cfg = { ...SD, timestep_spacing: "leading", steps_offset: 1 };
    const ancestral = eulerScheduler(cfg, 10, true);
    let draws = 0;
    ancestral.step(eps, 0, x0, () => {
      draws++;
      return Float32Array.of(1, 1, 1);
    });
    expect(draws).toBe(1);
    eulerScheduler(cfg, 10, false).step(eps, 0, x0, noNoise);
  });

  it("createScheduler picks the class named in the config, falling back to Euler", () => {
    expect(createScheduler({ ...SD, _class_name: "EulerDiscreteScheduler" }, 4).kind).toBe(SchedulerKind.EulerDiscrete);
    expect(createScheduler({ ...SD, _class_name: "LCMScheduler" }, 4).kind).toBe(SchedulerKind.Lcm);
    expect(createScheduler({ ...SD, _class_name: "DDIMScheduler" }, 4).kind).toBe(SchedulerKind.Ddim);
    expect(createScheduler({ ...SD, _class_name: "EulerAncestralDiscreteScheduler" }, 4).kind).toBe(SchedulerKind.EulerAncestral);
    expect(createScheduler({ ...SD, _class_name: "PNDMScheduler" }, 4).kind).toBe(SchedulerKind.EulerDiscrete);
    expect(createScheduler({ ...SD, _class_name: "PNDMScheduler" }, 4, SchedulerKind.Ddim).kind).toBe(SchedulerKind.Ddim);
    expect(createScheduler({ ...SD, _class_name: "DPMSolverMultistepScheduler" }, 4).kind).toBe(SchedulerKind.EulerDiscrete);
  });

  it("createScheduler rejects unknown classes (other flow-matching ones too), naming the supported ones", () => {
    const heun = { _class_name: "FlowMatchHeunDiscreteScheduler", num_train_timesteps: 1000, shift: 3 };
    expect(() => createScheduler(heun, 28)).toThrow(/unsupported scheduler class "FlowMatchHeunDiscreteScheduler"/);
    expect(() => createScheduler(heun, 28)).toThrow(
      /supported: EulerDiscreteScheduler, .*LCMScheduler, FlowMatchEulerDiscreteScheduler.*only FlowMatchEulerDiscreteScheduler \(SD3, SD3\.5\) is implemented/,
    );
    expect(() => createScheduler({ ...SD, _class_name: "HeunDiscreteScheduler" }, 4)).toThrow(/"HeunDiscreteScheduler"/);
    expect(() => createScheduler(SD, 4)).toThrow(/no _class_name/);
  });

  it("createScheduler refuses options that change the sampling and are not implemented, instead of running without them", () => {
    const euler = { ...SD, _class_name: "EulerDiscreteScheduler" };
    expect(() => createScheduler({ ...euler, use_karras_sigmas: true }, 4)).toThrow(
      /scheduler: use_karras_sigmas: true change the sampling/,
    );
    expect(() => createScheduler({ ...euler, timestep_type: "continuous", rescale_betas_zero_snr: true }, 4)).toThrow(
      /rescale_betas_zero_snr: true, timestep_type: "continuous"/,
    );
    expect(() => createScheduler({ ...SD, _class_name: "DDIMScheduler", thresholding: true }, 4)).toThrow(/thresholding: true/);
    // Their defaults, as SDXL's and SD-Turbo's configs spell them out, run.
    const spelled = {
      ...euler,
      use_karras_sigmas: false,
      interpolation_type: "linear",
      timestep_type: "discrete",
      rescale_betas_zero_snr: false,
      final_sigmas_type: "zero",
    };
    expect(createScheduler(spelled, 4).kind).toBe(SchedulerKind.EulerDiscrete);
  });
});

describe("flow-matching Euler (SD3, SD3.5: FlowMatchEulerDiscreteScheduler, shift 3)", () => {
  const SD35 = { _class_name: "FlowMatchEulerDiscreteScheduler", num_train_timesteps: 1000, shift: 3 };

  it("spans the shifted training schedule's ends, σ = 1 down to shift(1/1000) in float32, before shifting again", () => {
    // diffusers' set_timesteps(2) spaces timesteps [1000, 2.99401209] (quoted in diffusers issue #14013), then shifts them.
    const two = flowMatchSigmas(SD35, 2);
    expect(two).toHaveLength(3);
    expect(two[0]).toBe(1);
    // shift(0.00299401209) = 3·s / (1 + 2·s) = 0.0089285714…: the smallest sigma is shifted twice, as diffusers releases do.
    expect(two[1]).toBeCloseTo(0.008928571, 8);
    expect(two[2]).toBe(0);
  });

  it("4 steps: sigmas, and timesteps σ·1000 in float32", () => {
    // linspace(1000, 2.994012, 4) / 1000 shifted: 1, 0.857692, 0.602151, 0.008929 (computed apart, in float64 then float32).
    const s = flowMatchScheduler(SD35, 4);
    expect(s.kind).toBe(SchedulerKind.FlowMatchEuler);
    expect(s.sigmas!.map((x) => Number(x.toFixed(6)))).toEqual([1, 0.857692, 0.602151, 0.008929, 0]);
    expect(s.timesteps.map((t) => Number(t.toFixed(3)))).toEqual([1000, 857.692, 602.151, 8.929]);
    expect(s.initNoiseSigma).toBe(1);
    expect(createScheduler(SD35, 4).timesteps).toEqual(s.timesteps);
    // shift 1 is the plain linear schedule.
    expect(flowMatchSigmas({ ...SD35, shift: 1 }, 3).map((x) => Number(x.toFixed(4)))).toEqual([1, 0.5005, 0.001, 0]);
  });

  it("a step moves along the predicted velocity by the sigma gap; the input is not scaled", () => {
    const s = flowMatchScheduler(SD35, 2);
    const x = Float32Array.of(1, -2);
    expect(s.scaleModelInput(x, 0)).toBe(x);
    const v = Float32Array.of(0.5, 1);
    const dt = Math.fround(s.sigmas![1] - s.sigmas![0]);
    const next = s.step(v, 0, x, noNoise);
    expect(next[0]).toBeCloseTo(1 + dt * 0.5, 6);
    expect(next[1]).toBeCloseTo(-2 + dt, 6);
    // The last step lands on σ = 0: x − σ·v, the model's clean estimate.
    const last = s.step(v, 1, x, noNoise);
    expect(last[0]).toBeCloseTo(1 - s.sigmas![1] * 0.5, 6);
  });

  it("refuses options that change the sampling and are not implemented (dynamic shifting is Flux's), and bad step counts", () => {
    expect(() => flowMatchScheduler({ ...SD35, use_dynamic_shifting: true }, 4)).toThrow(/use_dynamic_shifting: true change the sampling/);
    expect(() => flowMatchScheduler({ ...SD35, invert_sigmas: true, stochastic_sampling: true }, 4)).toThrow(
      /invert_sigmas: true, stochastic_sampling: true/,
    );
    expect(() => createScheduler({ ...SD35, use_karras_sigmas: true }, 4)).toThrow(/use_karras_sigmas: true/);
    expect(() => flowMatchScheduler({ ...SD35, shift_terminal: 0.1 }, 4)).toThrow(/shift_terminal: 0.1/);
    expect(() => flowMatchScheduler(SD35, 0)).toThrow(/steps must be a whole number from 1/);
    // Their defaults, spelled out as some configs do, run.
    expect(
      flowMatchScheduler(
        { ...SD35, use_dynamic_shifting: false, invert_sigmas: false, shift_terminal: null, time_shift_type: "exponential" },
        2,
      ).timesteps,
    ).toHaveLength(2);
  });
});
