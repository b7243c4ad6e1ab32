/**
 * The public messages (what callers send and read, over NATS or HTTP), and their JSON Schemas
 * generated from the zod schemas: the OpenAPI document of the HTTP gateway and the committed
 * `schemas/*.json` both come from `publicJsonSchema`.
 */
import { z } from "zod";
import { ErrorCodes } from "./errors.ts";
import { JobAcceptedSchema, JobEventSchema, JobIdSchema } from "./jobs.ts";
import { GenerateReplySchema, GenerateRequestSchema, ManagerPlanReplySchema, PlanSchema, PROTOCOL_VERSION } from "./messages.ts";
import { GenerationRangesSchema } from "./profile.ts";

/** The body of an error reply (`toWireError`), on NATS and on HTTP. */
export const ErrorReplySchema = z.strictObject({
  v: z.literal(PROTOCOL_VERSION),
  error: z.strictObject({
    code: z.enum(Object.keys(ErrorCodes) as [keyof typeof ErrorCodes, ...(keyof typeof ErrorCodes)[]]),
    /** The HTTP-like status of the code (the HTTP gateway answers with it). */
    status: z.number().int(),
    message: z.string(),
    retryable: z.boolean(),
    /** `field` (the request field at fault), `retryAfterMs`, `requestId`, … */
    details: z.record(z.string(), z.unknown()).optional(),
  }),
});
/** An error reply. */
export type ErrorReply = z.infer<typeof ErrorReplySchema>;

/** One model of the pool as `GET /v1/models` lists it. */
export const ModelEntrySchema = z.strictObject({
  name: z.string(),
  displayName: z.string().optional(),
  /** The settings a request may give it (sizes, steps, guidance); absent: none. */
  options: GenerationRangesSchema.optional(),
  /** Its part in the plan in force: `light`, `heavy`, `both` (a single-model plan), or null (not planned). */
  role: z.enum(["light", "heavy", "both"]).nullable(),
  /** Workers the plan in force gives it. */
  workers: z.number().int().nonnegative(),
  batchSize: z.number().int().positive().optional(),
});

/** `GET /v1/models`: the pool, and the plan in force (null before the first) with the demand estimate. */
export const ModelsReplySchema = z.strictObject({
  models: z.array(ModelEntrySchema),
  plan: PlanSchema.nullable(),
  demandQps: z.number().nonnegative().nullable(),
});
/** A models answer. */
export type ModelsReply = z.infer<typeof ModelsReplySchema>;

/** `GET /v1/jobs/<id>` as JSON: the job's events so far, its status (the last event's kind) and, once ended, its result or error. */
export const JobStatusSchema = z.strictObject({
  jobId: JobIdSchema,
  status: z.string(),
  /** True once the job has ended (`done` or `failed`). */
  ended: z.boolean(),
  events: z.array(JobEventSchema),
});
/** A job's status. */
export type JobStatus = z.infer<typeof JobStatusSchema>;

/** Every public message by the name its JSON Schema file and OpenAPI component carry, with the direction it is read in. */
export const PUBLIC_SCHEMAS = {
  GenerateRequest: { schema: GenerateRequestSchema, io: "input" },
  GenerateReply: { schema: GenerateReplySchema, io: "output" },
  ErrorReply: { schema: ErrorReplySchema, io: "output" },
  JobAccepted: { schema: JobAcceptedSchema, io: "output" },
  JobEvent: { schema: JobEventSchema, io: "output" },
  JobStatus: { schema: JobStatusSchema, io: "output" },
  ModelsReply: { schema: ModelsReplySchema, io: "output" },
  ManagerPlanReply: { schema: ManagerPlanReplySchema, io: "output" },
} as const;
/** The name of a public message. */
export type PublicSchemaName = keyof typeof PUBLIC_SCHEMAS;

/**
 * The JSON Schema (draft 2020-12) of a public message. Byte fields (an image) are base64 strings,
 * as JSON carries them; a size is given whole (`dependentRequired`), as the zod schema's
 * refinement checks; `io: "input"` describes what a sender may write (defaults optional).
 */
export function publicJsonSchema(name: PublicSchemaName): Record<string, unknown> {
  const { schema, io } = PUBLIC_SCHEMAS[name];
  const json = z.toJSONSchema(schema, {
    io,
    target: "draft-2020-12",
    // (Only the byte fields are custom: the override below gives them their JSON form.)
    unrepresentable: "any",
    override: (ctx) => {
      const def = (ctx.zodSchema as { _zod: { def: { type: string } } })._zod.def;
      if (def.type === "custom") {
        for (const key of Object.keys(ctx.jsonSchema)) delete (ctx.jsonSchema as Record<string, unknown>)[key];
        Object.assign(ctx.jsonSchema, { type: "string", contentEncoding: "base64", contentMediaType: "image/png" });
      }
      if (ctx.zodSchema === GenerateRequestSchema)
        Object.assign(ctx.jsonSchema, { dependentRequired: { width: ["height"], height: ["width"] } });
    },
  }) as Record<string, unknown>;
  return { ...json, $id: `https://hadis-ts.dev/schemas/${name}.json`, title: name };
}
