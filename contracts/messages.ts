/**
 * Message schemas of every HADIS subject, validated at the edge, with their inferred types.
 * Every internal message carries the protocol version `v`; on `hadis.generate` it is optional.
 */
import { TOKEN } from "./subjects.ts";
import { z } from "zod";
import { MAX_DEADLINE_MS, MAX_IDEMPOTENCY_KEY_CHARS, MAX_SEED, MAX_SERVICE_ID_CHARS } from "./limits.ts";
import { AdmissionSchema } from "./admission.ts";
import { CallerPromptSchema, isBlankPrompt, MAX_PROMPT_CHARS, promptChars, refuseLongText, type RefusalParams } from "./prompt.ts";

export { CallerPromptSchema, isBlankPrompt, MAX_PROMPT_CHARS, promptChars, type RefusalParams };
export { MAX_DEADLINE_MS, MAX_IDEMPOTENCY_KEY_CHARS, MAX_SEED, MAX_SERVICE_ID_CHARS };

/** The protocol version this build speaks. */
export const PROTOCOL_VERSION = 1;

/** A prompt inside the system, checked by the router: in UTF-16 units, which a character takes one or two of. */
const promptText = z
  .string()
  .min(1)
  .max(2 * MAX_PROMPT_CHARS);

/** The deadline a router gives a request: the one it asked for, else the SLO in force, at most `MAX_DEADLINE_MS`. */
export function deadlineOf(request: { deadlineMs?: number | undefined }, sloMs: number): number {
  return request.deadlineMs ?? Math.min(sloMs, MAX_DEADLINE_MS);
}

/**
 * How a request was served. ASCII on the wire: clients that read text headers and bodies as
 * bytes (libnats, Prometheus label matchers typed at a keyboard) need no arrow.
 */
export const Routes = { light: "light", heavy: "heavy", lightThenHeavy: "light->heavy" } as const;
/** One of the routes. */
export type Route = (typeof Routes)[keyof typeof Routes];
/** The escalated route as routers before the ASCII name sent it: still read, as `Routes.lightThenHeavy`. */
export const LEGACY_LIGHT_THEN_HEAVY = "light\u2192heavy";

/** A route as read from a reply or a report: the legacy arrow becomes `Routes.lightThenHeavy`; anything else is kept as it is. */
export function readRoute(route: string): string {
  return route === LEGACY_LIGHT_THEN_HEAVY ? Routes.lightThenHeavy : route;
}

/**
 * Why a reply's image is not the one the cascade meant: the light image because the heavy
 * generation failed, because the judge rejected it but the time left could not fit the heavy model,
 * because the heavy image had not come as the deadline neared, because the judge failed or because
 * no time was left to judge it; or the heavy stage made by another model than the one decided,
 * the plan in force having taken that model's workers away.
 */
export const Fallbacks = {
  heavyFailed: "heavy_failed",
  noTimeForHeavy: "no_time_for_heavy",
  heavyLate: "heavy_late",
  judgeFailed: "judge_failed",
  noTimeToJudge: "no_time_to_judge",
  heavyMoved: "heavy_moved",
} as const;
/** One of the fallbacks. */
export type Fallback = (typeof Fallbacks)[keyof typeof Fallbacks];

/** What a worker is doing. */
export const WorkerStates = {
  idle: "idle",
  loading: "loading",
  serving: "serving",
  unloading: "unloading",
  draining: "draining",
  failed: "failed",
} as const;
/** One of the worker states. */
export type WorkerState = (typeof WorkerStates)[keyof typeof WorkerStates];

const modelName = z.string().max(64).regex(TOKEN, "model names are one subject token");
const version = z.literal(PROTOCOL_VERSION);
const bytes = z.custom<Uint8Array>((value) => value instanceof Uint8Array, "expected bytes");
const nonNegMs = z.number().finite().nonnegative();
/** A request id as routers make them (22 characters, or a keyed request's 34). */
const requestId = z.string().min(1).max(128);
/** A worker's or router's id: one subject token (its heartbeats and stats are published under it). */
const serviceId = z.string().max(MAX_SERVICE_ID_CHARS).regex(TOKEN, "worker and router ids are one subject token");

/** Largest image side a request may ask for, in pixels (a model's profile narrows it to the sizes it supports). */
export const MAX_IMAGE_SIDE = 4096;
/** Most denoising steps a request may ask for (a model's profile narrows it). */
export const MAX_STEPS = 1_000;
/** Largest classifier-free guidance scale a request may ask for (a model's profile narrows it). */
export const MAX_GUIDANCE_SCALE = 100;

/**
 * How a request picks its model: `auto` (the default) lets the router and the discriminator
 * decide; `fast` pins the plan's light model (served unjudged, never escalated); `best` pins the
 * plan's heavy model (and fails rather than fall back to the light one).
 */
export const Qualities = { auto: "auto", fast: "fast", best: "best" } as const;
/** One of the qualities. */
export type Quality = (typeof Qualities)[keyof typeof Qualities];

/**
 * Per-request generation settings a caller may give, carried to the worker. Each is optional: the
 * serving model's own setting applies to what is not given. Bounds here are the wire's; the
 * serving model's profile (`options` in profiles/models/*.json) says what it supports.
 */
export const GenerationOptionsSchema = z.strictObject({
  /** What the image should not show (classifier-free guidance's unconditional text), at most 2,000 characters. */
  negativePrompt: z
    .string()
    .superRefine((text, ctx) => refuseLongText("negativePrompt", text, ctx))
    .max(2 * MAX_PROMPT_CHARS)
    .optional(),
  /** Image width in pixels; give `height` with it. */
  width: z.number().int().positive().max(MAX_IMAGE_SIDE).optional(),
  /** Image height in pixels; give `width` with it. */
  height: z.number().int().positive().max(MAX_IMAGE_SIDE).optional(),
  /** Denoising steps. */
  steps: z.number().int().positive().max(MAX_STEPS).optional(),
  /** Classifier-free guidance scale (0 or 1: no guidance). */
  guidanceScale: z.number().finite().min(0).max(MAX_GUIDANCE_SCALE).optional(),
});
/** Per-request generation settings. */
export type GenerationOptions = z.infer<typeof GenerationOptionsSchema>;
/** The names of the generation settings, in the order a request lists them. */
export const GENERATION_OPTION_KEYS = Object.keys(GenerationOptionsSchema.shape) as (keyof GenerationOptions)[];

/** A size is given whole: a width without a height (or the reverse) is refused, naming the missing one. */
function sizeGivenWhole(request: { width?: number | undefined; height?: number | undefined }, ctx: z.RefinementCtx): void {
  if ((request.width === undefined) === (request.height === undefined)) return;
  const missing = request.width === undefined ? "width" : "height";
  ctx.addIssue({ code: "custom", path: [missing], message: `give width and height together (${missing} is missing)` });
}

/** `hadis.generate` request (from any client). */
export const GenerateRequestSchema = z
  .strictObject({
    v: version.optional(),
    prompt: CallerPromptSchema,
    seed: z.number().int().min(0).max(MAX_SEED).optional(),
    deadlineMs: z.number().int().positive().max(MAX_DEADLINE_MS).optional(),
    idempotencyKey: z.string().min(1).max(MAX_IDEMPOTENCY_KEY_CHARS).optional(),
    ...GenerationOptionsSchema.shape,
    /** `auto` (default), `fast` (the plan's light model) or `best` (its heavy model). */
    quality: z.enum([Qualities.auto, Qualities.fast, Qualities.best]).optional(),
    /**
     * Preview, then upgrade: when the judge rejects the light image and the heavy model is asked,
     * that light image is sent at once (`final: false`), before the final reply. Absent or false:
     * one reply, as ever.
     */
    preview: z.boolean().optional(),
  })
  .superRefine(sizeGivenWhole);
/** A validated generate request. */
export type GenerateRequest = z.infer<typeof GenerateRequestSchema>;

/** The generation settings a request gave (none: an empty object). */
export function generationOptionsOf(request: GenerationOptions): GenerationOptions {
  const options: GenerationOptions = {};
  for (const key of GENERATION_OPTION_KEYS) if (request[key] !== undefined) (options as Record<string, unknown>)[key] = request[key];
  return options;
}

/**
 * What the worker applied to make an image: the settings in force (the caller's, or the model's
 * own), the image's size, and whether the latency was emulated from a profile (`emulated`: the
 * profile backend, whose image is a placeholder).
 */
export const AppliedOptionsSchema = z.strictObject({
  steps: z.number().int().positive().optional(),
  guidanceScale: z.number().finite().nonnegative().optional(),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  /** A negative prompt was used. */
  negativePrompt: z.boolean(),
  /** The profile backend: a placeholder image after the profiled latency (scaled by steps when its profile allows). */
  emulated: z.boolean().optional(),
});
/** What a worker applied. */
export type AppliedOptions = z.infer<typeof AppliedOptionsSchema>;

/** Per-stage timings of one request, in milliseconds. */
export const StageTimingsSchema = z.strictObject({
  routeMs: nonNegMs,
  queueWaitMs: nonNegMs,
  lightMs: nonNegMs,
  judgeMs: nonNegMs,
  heavyMs: nonNegMs,
  totalMs: nonNegMs,
});
/** Per-stage timings of one request, in milliseconds. */
export type StageTimings = z.infer<typeof StageTimingsSchema>;

/** `hadis.generate` reply. */
export const GenerateReplySchema = z.strictObject({
  v: version,
  requestId: z.string(),
  image: bytes,
  imageFormat: z.literal("png"),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  seed: z.number().int(),
  route: z.enum([Routes.light, Routes.heavy, Routes.lightThenHeavy]),
  models: z.strictObject({ light: modelName.optional(), heavy: modelName.optional() }),
  servedBy: modelName,
  difficulty: z.number(),
  routerThreshold: z.number(),
  score: z.number().optional(),
  threshold: z.number().optional(),
  planEpoch: z.number().int().nonnegative(),
  timings: StageTimingsSchema,
  deduplicated: z.boolean().optional(),
  /** Set when the image is not the one the cascade meant (the light image in place of a judged or heavy one, or the heavy stage on another model), saying why. */
  fallback: z.enum(Object.values(Fallbacks) as [Fallback, ...Fallback[]]).optional(),
  /** What the serving worker applied (settings, size; `emulated` for the profile backend). */
  applied: AppliedOptionsSchema.optional(),
  /**
   * Only when the request asked for a preview: false on the preview (the light image the judge
   * rejected, sent while the heavy model makes the final one), true on the last message. Absent:
   * the only reply.
   */
  final: z.boolean().optional(),
  /** hadis-plus's admission of the request (its choice and the path estimate it chose on); absent under other policies. */
  admission: AdmissionSchema.optional(),
});
/** A generate reply. */
export type GenerateReply = z.infer<typeof GenerateReplySchema>;
/**
 * A generate reply as a client reads it: fields it does not know are dropped, not refused, and a
 * `fallback` it does not know is kept as its text, so a router newer than its clients can add an
 * optional field or a reason (what it sends is still checked whole). An older router's escalated
 * route, `light→heavy`, is read as `light->heavy`.
 */
export const GenerateReplyReadSchema = z.object({
  ...GenerateReplySchema.shape,
  route: z.enum([Routes.light, Routes.heavy, Routes.lightThenHeavy, LEGACY_LIGHT_THEN_HEAVY]).transform((r) => readRoute(r) as Route),
  models: z.object(GenerateReplySchema.shape.models.shape),
  timings: z.object(StageTimingsSchema.shape),
  fallback: z.string().max(256).optional(),
  applied: z.object(AppliedOptionsSchema.shape).optional(),
});
/** A generate reply as a client reads it (`fallback` may be a reason newer than this code). */
export type GenerateReplyRead = z.infer<typeof GenerateReplyReadSchema>;

/** Stage of the cascade a generation belongs to. */
const stage = z.enum(["light", "heavy"]);

// A subject: one with a space or a wildcard cannot be published to (the worker's reply would
// throw), nor one past the server's control line (it would close the worker's connection).
const replySubject = z
  .string()
  .max(256)
  .regex(/^[^\s*>]+$/, "a subject without spaces or wildcards");

/** A work item on `hadis.work.<model>`. */
export const WorkItemSchema = z.strictObject({
  v: version,
  requestId,
  stage,
  prompt: promptText,
  seed: z.number().int(),
  model: modelName,
  replyTo: replySubject,
  enqueuedAtMs: nonNegMs,
  deadlineAtMs: nonNegMs,
  planEpoch: z.number().int().nonnegative(),
  /** The caller's generation settings, checked against the model's profile by the router (absent: the model's own). */
  options: GenerationOptionsSchema.optional(),
  /**
   * The router will judge this light image: a worker that holds a judge scores it right after the
   * batch and sends the verdict with the result (no hop to the discriminator). Absent: no verdict,
   * so a router that does not read one is never sent one.
   */
  wantsVerdict: z.literal(true).optional(),
});
/** A work item. */
export type WorkItem = z.infer<typeof WorkItemSchema>;
/**
 * Where a work item's result goes, read from an item that does not validate as a whole (a
 * router of another version, a field out of range): enough to tell its router it was refused.
 */
export const WorkItemAddressSchema = z.object({ requestId, stage, model: modelName, replyTo: replySubject });
/** A work item's address. */
export type WorkItemAddress = z.infer<typeof WorkItemAddressSchema>;

const wireErrorBody = z.object({
  code: z.string(),
  status: z.number(),
  message: z.string(),
  retryable: z.boolean(),
  details: z.record(z.string(), z.unknown()).optional(),
});

/** A worker's result for one work item, sent to the owning router. */
export const WorkResultSchema = z.discriminatedUnion("ok", [
  z.strictObject({
    v: version,
    ok: z.literal(true),
    requestId,
    stage,
    model: modelName,
    workerId: serviceId,
    image: bytes,
    width: z.number().int().positive(),
    height: z.number().int().positive(),
    batchSize: z.number().int().positive(),
    queueWaitMs: nonNegMs,
    execMs: nonNegMs,
    /** What the backend applied (workers before it send none). */
    applied: AppliedOptionsSchema.optional(),
    /** The worker's own verdict on the image, when the item wanted one and the worker could judge it. */
    verdict: z.lazy(() => WorkerVerdictSchema).optional(),
  }),
  z.strictObject({
    v: version,
    ok: z.literal(false),
    requestId,
    stage,
    model: modelName,
    workerId: serviceId,
    error: wireErrorBody,
  }),
]);
/** A work result. */
export type WorkResult = z.infer<typeof WorkResultSchema>;

/** `hadis.judge` request. */
export const JudgeRequestSchema = z.strictObject({
  v: version,
  requestId,
  prompt: promptText,
  model: modelName,
  image: bytes,
  planEpoch: z.number().int().nonnegative(),
  /**
   * Epoch ms after which the router no longer waits for the verdict: a discriminator that reaches
   * the image later drops it unscored. Absent (routers before it), the image is always scored.
   */
  answerByMs: nonNegMs.optional(),
});
/** A judge request. */
export type JudgeRequest = z.infer<typeof JudgeRequestSchema>;

/** `hadis.judge` reply: the score, the threshold in force, and the verdict. */
export const JudgeReplySchema = z.strictObject({
  v: version,
  score: z.number(),
  threshold: z.number(),
  accept: z.boolean(),
  planEpoch: z.number().int().nonnegative(),
  judgeMs: nonNegMs,
});
/** A judge reply. */
export type JudgeReply = z.infer<typeof JudgeReplySchema>;

/** A verdict a worker gave on the light image it made: a judge reply's fields, carried in the work result. */
export const WorkerVerdictSchema = JudgeReplySchema.omit({ v: true });
/** A worker's verdict. */
export type WorkerVerdict = z.infer<typeof WorkerVerdictSchema>;

/** Workers and batch size the plan gives one model. */
export const ModelAllocationSchema = z.strictObject({
  workers: z.number().int().nonnegative(),
  batchSize: z.number().int().positive(),
});
/** Workers and batch size for one model. */
export type ModelAllocation = z.infer<typeof ModelAllocationSchema>;

/** The plan: a whole snapshot with a rising epoch, kept in JetStream KV. */
export const PlanSchema = z.strictObject({
  v: version,
  epoch: z.number().int().nonnegative(),
  policy: z.string(),
  issuedAtMs: nonNegMs,
  sloMs: z.number().positive(),
  timeScale: z.number().positive(),
  pair: z.strictObject({ light: modelName, heavy: modelName }),
  /** Share of prompts (0..1) the router sends straight to the heavy model. */
  routerThreshold: z.number().min(0).max(1),
  /**
   * How that share is picked: the hardest prompts (`difficulty`), or at random (`random`: a mix
   * without cascade); `workers`: every request to one of the plan's models with probability in
   * proportion to its workers (the artifact's Proteus: each worker an equal share of the traffic).
   */
  routerMode: z.enum(["difficulty", "random", "workers"]).optional(),
  /** Share of light images (0..1) the discriminator escalates: the quantile of the light model's scores. */
  discThreshold: z.number().min(0).max(1),
  /** Expected share of requests that end on the heavy model. */
  heavyShare: z.number().min(0).max(1),
  /** Expected FID of the configuration (profile tables). */
  expectedFid: z.number().optional(),
  models: z.record(modelName, ModelAllocationSchema),
  assignment: z.record(z.string(), modelName),
  reason: z.string(),
  /** Degradation step in force (0 = normal). */
  degraded: z.number().int().nonnegative().optional(),
  /** Demand estimate (EWMA, qps) the plan was made for; a restarted manager starts from it. */
  demandQps: z.number().nonnegative().optional(),
  /** Largest demand (qps) the plan's workers carry. */
  capacityQps: z.number().nonnegative().optional(),
  /**
   * Admission: routers sharing the capacity, and the share (0..1] of Little's bound
   * (capacity × deadline) a router lets be in flight before it refuses with `overloaded`.
   */
  admission: z.strictObject({ routers: z.number().int().positive(), headroom: z.number().positive().max(1) }).optional(),
  /**
   * The paper artifact's mechanisms the system runs under (`actors/artifact/mechanisms.ts`:
   * `dispatch`, `drops`, `latency`, `swaps`, …); absent or empty: our design. Every service follows
   * the plan in force, so one manager flag switches the whole system.
   */
  mechanisms: z
    .array(z.string().regex(/^[a-z]{1,16}$/))
    .max(16)
    .optional(),
});
/** A plan snapshot. */
export type Plan = z.infer<typeof PlanSchema>;

/**
 * JetStream's max-deliveries advisory (`io.nats.jetstream.advisory.v1.max_deliver`, JSON): the
 * item at `stream_seq` went to consumers `deliveries` times and was never acknowledged. Other
 * fields the server sends (type, id, timestamp, domain) are let through.
 */
export const MaxDeliveriesAdvisorySchema = z.object({
  stream: z.string(),
  consumer: z.string(),
  stream_seq: z.number().int().positive(),
  deliveries: z.number().int().nonnegative(),
});
/** The resource manager's answer on its plan endpoint (`hadis.manager.plan`): the plan in force (none yet: null) and its demand estimate. */
export const ManagerPlanReplySchema = z.strictObject({
  plan: PlanSchema.nullable(),
  demandQps: z.number().nonnegative(),
});
/** A plan endpoint answer. */
export type ManagerPlanReply = z.infer<typeof ManagerPlanReplySchema>;

/** Workers beat once a second; one silent this long is gone, to the resource manager, the routers, `hadis status` and the dashboard alike. */
export const WORKER_SILENT_AFTER_MS = 3_000;

/** A worker's heartbeat. */
export const WorkerHeartbeatSchema = z.strictObject({
  v: version,
  workerId: serviceId,
  backend: z.string().max(64),
  model: modelName.nullable(),
  state: z.enum(Object.values(WorkerStates) as [WorkerState, ...WorkerState[]]),
  batchSize: z.number().int().nonnegative(),
  inFlight: z.number().int().nonnegative(),
  servedTotal: z.number().int().nonnegative(),
  swapsTotal: z.number().int().nonnegative(),
  planEpoch: z.number().int().nonnegative(),
  sentAtMs: nonNegMs,
  lastError: z.string().max(2_048).optional(),
  /**
   * While `state` is failed because a model would not load, or because the loaded model's last
   * batches failed in every item (three in a row on two prompts at least, until one runs): that model. The
   * resource manager benches the worker for a while and, when the model fails on several
   * workers, plans without it.
   */
  failedModel: modelName.optional(),
  /** The largest batch the worker takes of its model, while below the plan's: a bigger batch ran only in parts (out of memory, say). */
  batchCap: z.number().int().positive().optional(),
});
/** A worker heartbeat. */
export type WorkerHeartbeat = z.infer<typeof WorkerHeartbeatSchema>;

/** `hadis.plan`: the resource manager's notice of a new epoch (the plan itself is in KV). */
export const PlanNoticeSchema = z.strictObject({
  v: version,
  epoch: z.number().int().nonnegative(),
});
/** A plan notice. */
export type PlanNotice = z.infer<typeof PlanNoticeSchema>;

/** A router's periodic load report. */
export const RouterStatsSchema = z.strictObject({
  v: version,
  routerId: serviceId,
  /** Requests that arrived in the interval (at most a billion: a larger count is a broken sender). */
  arrivals: z.number().int().nonnegative().max(1e9),
  /** The interval, ms: from 1 ms to an hour (the manager divides by it). */
  intervalMs: z.number().min(1).max(3_600_000),
  inFlight: z.number().int().nonnegative(),
  /** Requests answered with an image in the interval. */
  served: z.number().int().nonnegative().optional(),
  /** Accepted requests answered in the interval (with an image or an error; refused bad input excluded). */
  answered: z.number().int().nonnegative().optional(),
  /** Of those, the ones that failed or missed the SLO. */
  violations: z.number().int().nonnegative().optional(),
  /** Work items this router queued per model in the interval (the artifact's per-model load signal). */
  enqueued: z.record(modelName, z.number().int().nonnegative().max(1e9)).optional(),
  sentAtMs: nonNegMs,
});
/** A router stats report. */
export type RouterStats = z.infer<typeof RouterStatsSchema>;
