/**
 * The request lifecycle as one XState machine:
 * received → routing → (light → judging → accepted | heavy) | heavy → replied, with `failed`
 * and `expired` reachable from every stage. The machine does no I/O: routing, generation and
 * judging are invoked actors the service provides. One clock (`RequestClock`) runs a request: the
 * actor's timers (the deadline) and the time the machine reads (its stage timings) alike.
 */
import { and, assign, createActor, enqueueActions, fromPromise, setup, stateIn } from "xstate";
import { asHadisError, HadisError } from "../../contracts/errors.ts";
import { Qualities, Routes, type GenerationOptions, type Quality, type StageTimings } from "../../contracts/messages.ts";
import type {
  GenerateCall,
  GenerateOutcome,
  JudgeCall,
  JudgeOutcome,
  PreviewEvent,
  RequestOutcome,
  RouteCall,
  RouteDecision,
  Stage,
} from "./types.ts";
import { REPLY_MARGIN_MS } from "./types.ts";
import { rescueAtMs } from "../routing/deadline-aware.ts";

/** Input of one request machine. */
export interface RequestInput {
  requestId: string;
  prompt: string;
  seed: number;
  /** Wall-clock ms at which the request is abandoned. */
  deadlineAtMs: number;
  /** Wall-clock ms at which the request was received. */
  receivedAtMs: number;
  /** Current time in ms: the request's clock's, set by `createRequestActor` (the one its timers run on). */
  now: () => number;
  /**
   * The least time a generation of `model` takes if asked now (0 when unknown; under hadis-plus's
   * plans the path ahead of it): a light image the judge rejects is escalated only when the time
   * left covers the heavy model's (otherwise it is served: a late heavy image would cost a GPU and
   * the caller the image it can have); under hadis-plus a prompt sent straight to the heavy model
   * turns to the light one when the light model's is all the time left (`rescueAtMs`).
   */
  floorMs?: (model: string) => number;
  /** The caller's generation settings, carried to the workers (absent: each model's own). */
  options?: GenerationOptions;
  /** `fast` pins the light model, `best` the heavy one (routing applies it); `auto` by default. */
  quality?: Quality;
  /**
   * The deadline carried by the request's work items, when not its own: the artifact's workers
   * drop an item that cannot finish within 1.5 × SLO of the request's start, while its caller
   * waits longer (`drops`).
   */
  workDeadlineAtMs?: number;
  /** An escalated request is served its light image as the deadline nears (default true; the artifact has no such fallback). */
  lightFallback?: boolean;
  /**
   * The caller asked to see the light image before the final one: when the judge rejects it and
   * the heavy model is asked, the machine emits a `preview` event with it (and only then: an
   * accepted light image, a hard prompt, or a rejection the heavy model has no time for ends in
   * one image, which the final reply carries).
   */
  preview?: boolean;
}

interface Context extends RequestInput {
  decision?: RouteDecision;
  light?: GenerateOutcome;
  judge?: JudgeOutcome;
  judgeError?: string;
  /** The heavy generation failed: the light image is served instead (made first, or after the failure for a hard prompt). */
  heavyError?: string;
  /** Escalated, and the heavy image had not come as the deadline neared (`heavyError` says so too). */
  heavyLate?: boolean;
  /** hadis-plus: when the light model races the heavy stage (set at its entry, if ahead). */
  raceAtMs?: number;
  /** The heavy generation's error while the light model raced it (the request fails with it if the light one does too). */
  heavyFailure?: unknown;
  /** The judge rejected the light image, and the time left could not fit the heavy model. */
  escalationSkipped?: boolean;
  heavy?: GenerateOutcome;
  error?: unknown;
  /** Set when the request ends without an image. */
  ended?: "failed" | "expired";
  stageStartMs: number;
  /** The stage running now (the last one entered). */
  stage?: Stage;
  timings: StageTimings;
}

const zeroTimings = (): StageTimings => ({ routeMs: 0, queueWaitMs: 0, lightMs: 0, judgeMs: 0, heavyMs: 0, totalMs: 0 });

/** Placeholder actors; services and tests `.provide()` the real ones. */
const missing = (name: string) =>
  fromPromise<never, unknown>(async () => {
    throw new Error(`request machine: actor "${name}" not provided`);
  });

const generationTime = (ctx: Context, out: GenerateOutcome) => {
  const wallMs = ctx.now() - ctx.stageStartMs;
  // A worker that judged the image spent that time too: it is the judge stage's, not the queue's.
  return { execMs: out.execMs, waitMs: Math.max(0, wallMs - out.execMs - (out.verdict?.judgeMs ?? 0)) };
};

/**
 * The generation of a stage: the decided model playing it, the request's prompt, seed and options,
 * and the deadline its work carries (the race's light generation too; under the artifact's drops
 * only a hadis-plus request races, its caller given `lightFallback`).
 */
const generateCall = (ctx: Context, stage: GenerateCall["stage"]): GenerateCall => ({
  requestId: ctx.requestId,
  stage,
  model: ctx.decision!.pair[stage],
  prompt: ctx.prompt,
  seed: ctx.seed,
  deadlineAtMs: ctx.workDeadlineAtMs ?? ctx.deadlineAtMs,
  planEpoch: ctx.decision!.planEpoch,
  ...(ctx.options ? { options: ctx.options } : {}),
});

/** The light image will be judged: the plan escalates some, and the heavy model has not already failed this request. */
const willJudge = (ctx: Context) => !ctx.decision!.skipJudge && ctx.heavyError === undefined;

/** The request machine; provide `route`, `generate` and `judge` actors before use. */
export const RequestMachine = setup({
  types: {} as { context: Context; input: RequestInput; output: RequestOutcome; emitted: PreviewEvent },
  actors: {
    route: missing("route") as unknown as ReturnType<typeof fromPromise<RouteDecision, RouteCall>>,
    generate: missing("generate") as unknown as ReturnType<typeof fromPromise<GenerateOutcome, GenerateCall>>,
    judge: missing("judge") as unknown as ReturnType<typeof fromPromise<JudgeOutcome, JudgeCall>>,
  },
  delays: {
    deadline: ({ context }) => Math.max(0, context.deadlineAtMs - context.now()),
    // An escalated request stops waiting for its heavy image this long before the deadline: the
    // light image it has goes out in time (the reply's own building and sending take the margin).
    lightBeforeDeadline: ({ context }) => Math.max(0, context.deadlineAtMs - REPLY_MARGIN_MS - context.now()),
    // hadis-plus: the last moment the light model can still answer a prompt waiting on the heavy one.
    rescue: ({ context }) => Math.max(0, (context.raceAtMs ?? context.deadlineAtMs) - context.now()),
  },
  guards: {
    // Nothing to judge for: the plan escalates nothing, or the heavy model already failed this request.
    skipJudge: ({ context }) => !willJudge(context),
    // The worker judged the light image where it was made: its verdict stands in for the judge call.
    judgedOnWorker: ({ context }) => context.light?.verdict !== undefined,
    // hadis-plus's admission sent it straight to the heavy model, which may be late: the light model
    // may race it (no light image yet, a cascade pair, a caller who did not pin the heavy model).
    // (Set at the heavy stage's entry only when that moment is still ahead: a light model that
    // cannot answer in the time left anyway is not asked, it would only add load.)
    rescuable: ({ context }) => context.raceAtMs !== undefined,
    // hadis-plus's admission may have ruled the heavy stage out already ("light": a rejected image is served).
    heavyFits: ({ context }) =>
      context.decision!.admission?.choice !== "light" &&
      context.deadlineAtMs - context.now() >= (context.floorMs?.(context.decision!.pair.heavy) ?? 0),
  },
  actions: {
    markStage: assign(({ context }, params: { stage: Stage }) => ({ stageStartMs: context.now(), stage: params.stage })),
    // The worker's verdict that came with the light image, taken as the judge's (its time as the judge stage's).
    takeWorkerVerdict: assign(({ context }) => {
      const { judgeMs, ...judge } = context.light!.verdict!;
      return { judge, timings: { ...context.timings, judgeMs } };
    }),
    // hadis-plus: when the light model would race a prompt sent straight to the heavy one (a
    // cascade pair, no light image, a caller who did not pin the heavy model), if that moment is ahead.
    scheduleRace: assign({
      raceAtMs: ({ context }) => {
        const d = context.decision!;
        if (d.admission === undefined || context.light !== undefined || d.pair.light === d.pair.heavy) return undefined;
        if (context.quality === Qualities.best || context.lightFallback === false) return undefined;
        const at = rescueAtMs(context.deadlineAtMs, context.floorMs?.(d.pair.light) ?? 0, REPLY_MARGIN_MS);
        return at > context.now() ? at : undefined;
      },
    }),
    finishTotal: assign({
      timings: ({ context }) => ({ ...context.timings, totalMs: Math.max(0, context.now() - context.receivedAtMs) }),
    }),
    // Escalating with a light image in hand: a caller who asked sees it now, not after the heavy stage.
    previewLight: enqueueActions(({ context, enqueue }) => {
      if (context.preview) enqueue.emit({ type: "preview", outcome: previewOf(context) });
    }),
  },
}).createMachine({
  id: "request",
  context: ({ input }) => ({ ...input, stageStartMs: input.now(), timings: zeroTimings() }),
  initial: "routing",
  after: { deadline: ".expired" },
  states: {
    routing: {
      entry: { type: "markStage", params: { stage: "route" } },
      invoke: {
        src: "route",
        input: ({ context }) => ({
          prompt: context.prompt,
          requestId: context.requestId,
          ...(context.quality ? { quality: context.quality } : {}),
          ...(context.options ? { options: context.options } : {}),
          leftMs: Math.max(0, context.deadlineAtMs - context.now()),
        }),
        onDone: [
          {
            guard: ({ event }) => event.output.hard,
            target: "heavy",
            actions: assign({
              decision: ({ event }) => event.output,
              timings: ({ context }) => ({ ...context.timings, routeMs: context.now() - context.stageStartMs }),
            }),
          },
          {
            target: "light",
            actions: assign({
              decision: ({ event }) => event.output,
              timings: ({ context }) => ({ ...context.timings, routeMs: context.now() - context.stageStartMs }),
            }),
          },
        ],
        onError: { target: "failed", actions: assign({ error: ({ event }) => event.error }) },
      },
    },
    light: {
      entry: { type: "markStage", params: { stage: "light" } },
      invoke: {
        src: "generate",
        input: ({ context }) => ({ ...generateCall(context, "light"), ...(willJudge(context) ? { wantsVerdict: true } : {}) }),
        onDone: {
          target: "lightDone",
          actions: assign({
            light: ({ event }) => event.output,
            timings: ({ context, event }) => {
              const t = generationTime(context, event.output);
              return { ...context.timings, lightMs: t.execMs, queueWaitMs: context.timings.queueWaitMs + t.waitMs };
            },
          }),
        },
        onError: { target: "failed", actions: assign({ error: ({ event }) => event.error }) },
      },
    },
    lightDone: {
      // A verdict that came with the image is acted on as the judge's would be (accept, escalate, or
      // serve the light image when the heavy model cannot answer in time); none: ask the judge.
      always: [
        { guard: "skipJudge", target: "accepted" },
        { guard: ({ context }) => context.light?.verdict?.accept === true, target: "accepted", actions: "takeWorkerVerdict" },
        { guard: and(["judgedOnWorker", "heavyFits"]), target: "heavy", actions: ["takeWorkerVerdict", "previewLight"] },
        { guard: "judgedOnWorker", target: "accepted", actions: ["takeWorkerVerdict", assign({ escalationSkipped: true })] },
        { target: "judging" },
      ],
    },
    judging: {
      entry: { type: "markStage", params: { stage: "judge" } },
      invoke: {
        src: "judge",
        input: ({ context }) => ({
          requestId: context.requestId,
          prompt: context.prompt,
          model: context.light!.model,
          image: context.light!.image,
          planEpoch: context.decision!.planEpoch,
          deadlineAtMs: context.deadlineAtMs,
        }),
        onDone: [
          {
            guard: ({ event }) => event.output.accept,
            target: "accepted",
            actions: assign({
              judge: ({ event }) => event.output,
              timings: ({ context }) => ({ ...context.timings, judgeMs: context.now() - context.stageStartMs }),
            }),
          },
          {
            guard: "heavyFits",
            target: "heavy",
            actions: [
              assign({
                judge: ({ event }) => event.output,
                timings: ({ context }) => ({ ...context.timings, judgeMs: context.now() - context.stageStartMs }),
              }),
              "previewLight",
            ],
          },
          {
            // Rejected, but the heavy model cannot answer in the time left: the light image it is.
            target: "accepted",
            actions: assign({
              judge: ({ event }) => event.output,
              escalationSkipped: true,
              timings: ({ context }) => ({ ...context.timings, judgeMs: context.now() - context.stageStartMs }),
            }),
          },
        ],
        // A judge that cannot answer must not cost the caller the image already made:
        // serve the light image, and say so in the reply.
        onError: {
          target: "accepted",
          actions: assign({
            judgeError: ({ event }) => asHadisError(event.error).message,
            timings: ({ context }) => ({ ...context.timings, judgeMs: context.now() - context.stageStartMs }),
          }),
        },
      },
    },
    heavy: {
      entry: [{ type: "markStage", params: { stage: "heavy" } }, "scheduleRace"],
      // hadis-plus: a prompt sent straight to the heavy model whose image has not come by the last
      // moment the light model can answer races it with the light model; the first image is
      // served (the light one marked heavy_late), the other generation withdrawn.
      initial: "alone",
      states: {
        alone: { after: { rescue: { guard: "rescuable", target: "racing" } } },
        racing: {
          invoke: {
            src: "generate",
            input: ({ context }) => generateCall(context, "light"),
            onDone: {
              target: "#request.accepted",
              actions: assign({
                light: ({ event }) => event.output,
                heavyError: () => "no heavy image by the last moment the light model could answer",
                heavyLate: true,
                timings: ({ context, event }) => ({ ...context.timings, lightMs: event.output.execMs }),
              }),
            },
            // The light model cannot answer either: the heavy generation goes on alone.
            onError: { target: "lost" },
          },
        },
        // A heavy generation that failed while the light one raced it has nothing left to wait for.
        lost: { always: { guard: ({ context }) => context.heavyFailure !== undefined, target: "#request.failed" } },
      },
      after: {
        lightBeforeDeadline: {
          // Escalated, and no heavy image as the deadline nears: the light image rather than an
          // error (the heavy work still queued is withdrawn as the generation stops).
          guard: ({ context }) => context.light !== undefined && context.lightFallback !== false,
          target: "accepted",
          actions: assign({ heavyError: () => `no heavy image ${REPLY_MARGIN_MS} ms before the deadline`, heavyLate: true }),
        },
      },
      invoke: {
        src: "generate",
        input: ({ context }) => generateCall(context, "heavy"),
        onDone: {
          target: "served",
          actions: assign({
            heavy: ({ event }) => event.output,
            timings: ({ context, event }) => {
              const t = generationTime(context, event.output);
              return { ...context.timings, heavyMs: t.execMs, queueWaitMs: context.timings.queueWaitMs + t.waitMs };
            },
          }),
        },
        onError: [
          {
            // Racing: the light image is on its way (asking the light model again would reuse its
            // message id, which JetStream drops as a duplicate); it answers, or the request fails.
            guard: stateIn({ heavy: "racing" }),
            actions: assign({ heavyError: ({ event }) => asHadisError(event.error).message, heavyFailure: ({ event }) => event.error }),
          },
          {
            guard: stateIn({ heavy: "lost" }),
            target: "failed",
            actions: assign({ error: ({ event }) => event.error }),
          },
          {
            // An escalated request has a light image: a heavy generation that fails, whatever the
            // error, must not cost the caller that image (as a judge that cannot answer does not).
            // (Timings stay those of the images made: the total counts the attempt.)
            guard: ({ context }) => context.light !== undefined && context.lightFallback !== false,
            target: "accepted",
            actions: assign({ heavyError: ({ event }) => asHadisError(event.error).message }),
          },
          {
            // A hard prompt sent straight to the heavy model: the light model makes its image (no
            // judging: there is nothing left to escalate to), when the heavy model failed it. Not
            // for a caller who pinned the heavy model (quality "best"): that one gets the error.
            guard: ({ context, event }) =>
              context.quality !== Qualities.best && event.error instanceof HadisError && event.error.code === "generation_failed",
            target: "light",
            actions: assign({ heavyError: ({ event }) => asHadisError(event.error).message }),
          },
          { target: "failed", actions: assign({ error: ({ event }) => event.error }) },
        ],
      },
    },
    accepted: { entry: "finishTotal", type: "final" },
    served: { entry: "finishTotal", type: "final" },
    failed: {
      entry: ["finishTotal", assign({ ended: "failed" as const, error: ({ context }) => context.error ?? context.heavyFailure })],
      type: "final",
    },
    expired: {
      entry: [
        "finishTotal",
        assign({ ended: "expired" as const }),
        assign({
          error: ({ context }) =>
            new HadisError("deadline_exceeded", `deadline of ${context.deadlineAtMs - context.receivedAtMs} ms exceeded`, {
              requestId: context.requestId,
            }),
        }),
      ],
      type: "final",
    },
  },
  output: ({ context }) => outcomeOf(context),
});

function outcomeOf(ctx: Context): RequestOutcome {
  if (ctx.ended) {
    return {
      ok: false,
      error: ctx.error,
      state: ctx.ended,
      timings: ctx.timings,
      decision: ctx.decision,
      ...(ctx.stage ? { stage: ctx.stage } : {}),
      ...(ctx.heavyError !== undefined ? { heavyError: ctx.heavyError } : {}),
    };
  }
  const decision = ctx.decision!;
  if (ctx.heavy) {
    const escalated = ctx.light !== undefined;
    return {
      ok: true,
      route: escalated ? Routes.lightThenHeavy : Routes.heavy,
      image: ctx.heavy,
      models: escalated ? { light: ctx.light!.model, heavy: ctx.heavy.model } : { heavy: ctx.heavy.model },
      decision,
      judge: ctx.judge,
      timings: ctx.timings,
    };
  }
  return {
    ok: true,
    route: Routes.light,
    image: ctx.light!,
    models: { light: ctx.light!.model },
    decision,
    judge: ctx.judge,
    judgeError: ctx.judgeError,
    ...(ctx.escalationSkipped || admittedLightOnly(decision) ? { escalationSkipped: true } : {}),
    ...(ctx.heavyError !== undefined ? { heavyError: ctx.heavyError } : {}),
    ...(ctx.heavyLate ? { heavyLate: true } : {}),
    timings: ctx.timings,
  };
}

/** A prompt routed hard that hadis-plus's admission sent to the light model, unjudged (the heavy one had no time). */
const admittedLightOnly = (d: RouteDecision) => d.admission?.choice === "light" && d.skipJudge;

/** The light image the judge rejected, as a served outcome of its own: what a preview carries (its total: the time so far). */
function previewOf(ctx: Context): PreviewEvent["outcome"] {
  return {
    ok: true,
    route: Routes.light,
    image: ctx.light!,
    models: { light: ctx.light!.model },
    decision: ctx.decision!,
    judge: ctx.judge,
    timings: { ...ctx.timings, totalMs: Math.max(0, ctx.now() - ctx.receivedAtMs) },
  };
}

/**
 * The one clock a request runs on: XState schedules its deadline on it and the machine reads the
 * time from it. A wall clock in the router, XState's `SimulatedClock` in tests.
 */
export interface RequestClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(id: unknown): void;
}

/** A request's actor (not started) on `clock`: the machine's `now` and its timers are that clock's. */
export function createRequestActor(machine: typeof RequestMachine, clock: RequestClock, input: Omit<RequestInput, "now">) {
  return createActor(machine, { clock, input: { ...input, now: () => clock.now() } });
}
