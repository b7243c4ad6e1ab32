/** Values the request machine exchanges with the actors the service provides. */
import type { Admission } from "../../contracts/admission.ts";
import type { AppliedOptions, GenerationOptions, Quality, Route, StageTimings } from "../../contracts/messages.ts";

/** A routing decision for one prompt under the plan in force. */
/**
 * Time kept back from a request's deadline to build and send its reply: the router stops waiting
 * for the judge, and an escalated request for its heavy image, this long before it.
 */
export const REPLY_MARGIN_MS = 25;

export interface RouteDecision {
  /** True when the prompt goes straight to the heavy model. */
  hard: boolean;
  /** Difficulty score of the prompt (higher = harder). */
  difficulty: number;
  /** Router share in force (0..1). */
  routerThreshold: number;
  pair: { light: string; heavy: string };
  /** True when light images are served without judging (the plan escalates none). */
  skipJudge: boolean;
  planEpoch: number;
  /**
   * hadis-plus's admission (its choice and estimate). "light": a rejected light image is served
   * (`no_time_for_heavy`); for a prompt routed hard, the light model's image unjudged, the same way.
   */
  admission?: Admission;
}

/** What the route actor gets. */
export interface RouteCall {
  prompt: string;
  requestId: string;
  /** `fast` or `best` pins a model of the pair; absent or `auto`: the routing policy decides. */
  quality?: Quality;
  /** The caller's generation settings: the route actor checks them against the models that may serve. */
  options?: GenerationOptions;
  /** Time left to the request's deadline, ms (hadis-plus's admission weighs the path ahead against it). */
  leftMs?: number;
}

/** What the generate actor gets. */
export interface GenerateCall {
  requestId: string;
  /** Which stage of the cascade this generation is. */
  stage: "light" | "heavy";
  model: string;
  prompt: string;
  seed: number;
  deadlineAtMs: number;
  planEpoch: number;
  /** The caller's generation settings (absent: the model's own). */
  options?: GenerationOptions;
  /** A light image the machine will judge: the worker may judge it where it is made and send the verdict along. */
  wantsVerdict?: boolean;
}

/** A generated image and how long it took on the worker. */
export interface GenerateOutcome {
  image: Uint8Array;
  width: number;
  height: number;
  model: string;
  workerId: string;
  batchSize: number;
  queueWaitMs: number;
  execMs: number;
  /** What the worker applied (settings, size), when it says. */
  applied?: AppliedOptions;
  /** The worker's verdict on this image (asked with `wantsVerdict`, given by a worker that holds a judge): no judge call is made. */
  verdict?: JudgeOutcome & { judgeMs: number };
}

/** What the judge actor gets. */
export interface JudgeCall {
  requestId: string;
  prompt: string;
  model: string;
  image: Uint8Array;
  planEpoch: number;
  /** The request's deadline, epoch ms: the judge is not waited for past it (the light image is served instead). */
  deadlineAtMs: number;
}

/** The discriminator's verdict. */
export interface JudgeOutcome {
  score: number;
  threshold: number;
  accept: boolean;
}

/** How a request ended: served with an image, or an error. */
export type RequestOutcome =
  | {
      ok: true;
      route: Route;
      image: GenerateOutcome;
      models: { light?: string; heavy?: string };
      decision: RouteDecision;
      judge?: JudgeOutcome;
      judgeError?: string;
      /** The judge rejected the light image (or hadis-plus's admission sent a hard prompt to the light model), and the time left could not fit the heavy model. */
      escalationSkipped?: boolean;
      /** The heavy generation failed (its error): the light image is served, made before it (escalated) or after (a hard prompt). */
      heavyError?: string;
      /** Escalated, and no heavy image came before the deadline (a `heavyError` that is not a failure). */
      heavyLate?: boolean;
      timings: StageTimings;
    }
  | {
      ok: false;
      error: unknown;
      state: "failed" | "expired";
      timings: StageTimings;
      decision?: RouteDecision;
      /** The stage it was in when it ended. */
      stage?: Stage;
      /** The heavy generation had failed before (a hard prompt then sent to the light model). */
      heavyError?: string;
    };

/**
 * What the request machine emits when it escalates a request that asked for a preview: the light
 * image the judge rejected, as a served outcome (route `light`, its verdict, the timings so far).
 */
export interface PreviewEvent {
  type: "preview";
  outcome: Extract<RequestOutcome, { ok: true }>;
}

/** Why a light image was not judged when the request had no time left for it (not a failure of the judge). */
export const NO_TIME_TO_JUDGE = "no time left before the deadline to judge the light image";

/** A stage of a request's lifecycle. */
export type Stage = "route" | "light" | "judge" | "heavy";
