/**
 * Asynchronous jobs: a generate request submitted on `hadis.jobs.submit` is answered at once with
 * a job id; its progress and its result are events on `hadis.jobs.<id>.<kind>`, kept in the jobs
 * stream so a caller that reconnects finds them. One schema per event kind.
 */
import { z } from "zod";
import { validate } from "./envelope.ts";
import {
  AppliedOptionsSchema,
  GenerateReplyReadSchema,
  GenerateReplySchema,
  PROTOCOL_VERSION,
  type GenerateReplyRead,
} from "./messages.ts";

/** What a job's events say, in the order they come: `done` or `failed` ends a job. */
export const JobEventKinds = {
  queued: "queued",
  routed: "routed",
  lightDone: "light_done",
  judged: "judged",
  heavyRunning: "heavy_running",
  /** The light image the judge rejected, while the heavy model makes the final one (a job that asked for `preview`). */
  preview: "preview",
  done: "done",
  failed: "failed",
} as const;
/** One of the job event kinds. */
export type JobEventKind = (typeof JobEventKinds)[keyof typeof JobEventKinds];

/** A job id: one subject token, as routers make them (22 characters). */
export const JobIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, "a job id is one subject token");

/** The answer on `hadis.jobs.submit`: the job's id and where its events are. */
export const JobAcceptedSchema = z.strictObject({
  v: z.literal(PROTOCOL_VERSION),
  jobId: JobIdSchema,
  /** The subject filter of the job's events (`hadis.jobs.<id>.*`). */
  events: z.string(),
  /** The stream that keeps them. */
  stream: z.string(),
  /** The job's deadline, epoch ms: no `done` or `failed` event by then (and a little more) means the router running it is gone. */
  deadlineAtMs: z.number().nonnegative(),
});
/** A job's acceptance. */
export type JobAccepted = z.infer<typeof JobAcceptedSchema>;

const wireError = z.object({
  code: z.string(),
  status: z.number(),
  message: z.string(),
  retryable: z.boolean(),
  details: z.record(z.string(), z.unknown()).optional(),
});

const base = {
  v: z.literal(PROTOCOL_VERSION),
  jobId: JobIdSchema,
  /** 1 for `queued`, then one more per event of the job. */
  seq: z.number().int().positive(),
  /** When it happened, epoch ms (the router's clock). */
  atMs: z.number().nonnegative(),
};

/** Every job event, by kind. `done` carries the whole generate reply; `failed` the typed error. */
export const JobEventSchema = z.discriminatedUnion("kind", [
  z.strictObject({ ...base, kind: z.literal(JobEventKinds.queued), deadlineAtMs: z.number().nonnegative() }),
  z.strictObject({
    ...base,
    kind: z.literal(JobEventKinds.routed),
    /** Straight to the heavy model (predicted hard, or quality `best`). */
    hard: z.boolean(),
    pair: z.strictObject({ light: z.string(), heavy: z.string() }),
    planEpoch: z.number().int().nonnegative(),
  }),
  z.strictObject({
    ...base,
    kind: z.literal(JobEventKinds.lightDone),
    model: z.string(),
    execMs: z.number().nonnegative(),
    applied: AppliedOptionsSchema.optional(),
  }),
  z.strictObject({ ...base, kind: z.literal(JobEventKinds.judged), score: z.number(), threshold: z.number(), accept: z.boolean() }),
  z.strictObject({ ...base, kind: z.literal(JobEventKinds.heavyRunning), model: z.string(), escalated: z.boolean() }),
  z.strictObject({ ...base, kind: z.literal(JobEventKinds.preview), result: GenerateReplySchema }),
  z.strictObject({ ...base, kind: z.literal(JobEventKinds.done), result: GenerateReplySchema }),
  z.strictObject({ ...base, kind: z.literal(JobEventKinds.failed), error: wireError }),
]);
/** A job event. */
export type JobEvent = z.infer<typeof JobEventSchema>;

/** A job event as a client reads it: a `preview` or `done` event's reply as `GenerateReplyReadSchema` reads replies. */
export type JobEventRead =
  | Exclude<JobEvent, { kind: "done" | "preview" }>
  | (Omit<Extract<JobEvent, { kind: "done" | "preview" }>, "result"> & { result: GenerateReplyRead });

/** Each kind's schema as a client reads it: fields a newer router adds are dropped, not refused. */
const READ_SCHEMAS: ReadonlyMap<string, z.ZodType> = new Map(
  JobEventSchema.options.map((o) => {
    const kind = o.shape.kind.value;
    const carriesReply = kind === JobEventKinds.done || kind === JobEventKinds.preview;
    return [kind, carriesReply ? z.object({ ...o.shape, result: GenerateReplyReadSchema }) : z.object(o.shape)] as const;
  }),
);

/**
 * Reads a decoded job event as a client: null for a kind this code does not know (a newer
 * router's progress event: skipped, so routers can add kinds without breaking readers); a typed
 * error (`validate`) when a known kind does not fit its schema.
 */
export function readJobEvent(value: unknown): JobEventRead | null {
  const kind = typeof value === "object" && value !== null ? (value as { kind?: unknown }).kind : undefined;
  const schema = typeof kind === "string" ? READ_SCHEMAS.get(kind) : undefined;
  if (!schema) {
    if (typeof kind === "string") return null;
    return validate(JobEventSchema, value, "job event"); // throws, naming what is wrong
  }
  return validate(schema, value, `job event ${kind}`) as JobEventRead;
}

/** True for the kinds that end a job. */
export function isTerminal(kind: string): kind is typeof JobEventKinds.done | typeof JobEventKinds.failed {
  return kind === JobEventKinds.done || kind === JobEventKinds.failed;
}

/** How long past its deadline a job with no terminal event is taken as lost (its router stopped mid-way), ms. */
export const JOB_LOST_AFTER_MS = 10_000;
