/**
 * The package's entry (`import { HadisClient } from "hadis-ts"`): the typed client of
 * `hadis.generate` and of jobs over NATS, the connection helper, and the wire contract's schemas,
 * types, subjects and errors, so another project calls HADIS with the same checks the services
 * apply. The JSON Schemas of the public messages ship too (`hadis-ts/schemas/<Name>.json`).
 */
export { HadisClient, isFinalMessage, readGenerateReply, replyWaitMs, type GenerateOptions } from "./client.ts";
export { connectNats, type NatsConnection } from "../nats/connection.ts";
export type { FollowOptions } from "../nats/job-stream.ts";
export {
  AppliedOptionsSchema,
  Fallbacks,
  GENERATION_OPTION_KEYS,
  GenerateReplyReadSchema,
  GenerateReplySchema,
  GenerateRequestSchema,
  GenerationOptionsSchema,
  MAX_DEADLINE_MS,
  MAX_GUIDANCE_SCALE,
  MAX_IDEMPOTENCY_KEY_CHARS,
  MAX_IMAGE_SIDE,
  MAX_PROMPT_CHARS,
  MAX_SEED,
  MAX_STEPS,
  ManagerPlanReplySchema,
  PROTOCOL_VERSION,
  PlanSchema,
  Qualities,
  Routes,
  promptChars,
  type AppliedOptions,
  type Fallback,
  type GenerateReply,
  type GenerateReplyRead,
  type GenerateRequest,
  type GenerationOptions,
  type ManagerPlanReply,
  type Plan,
  type Quality,
  type Route,
} from "../../contracts/messages.ts";
export {
  JOB_LOST_AFTER_MS,
  JobAcceptedSchema,
  JobEventKinds,
  JobEventSchema,
  isTerminal,
  readJobEvent,
  type JobAccepted,
  type JobEvent,
  type JobEventKind,
  type JobEventRead,
} from "../../contracts/jobs.ts";
export {
  ErrorReplySchema,
  JobStatusSchema,
  ModelsReplySchema,
  PUBLIC_SCHEMAS,
  publicJsonSchema,
  type ErrorReply,
  type JobStatus,
  type ModelsReply,
  type PublicSchemaName,
} from "../../contracts/public.ts";
export {
  ErrorCodes,
  HadisError,
  fromWireError,
  isWireError,
  toWireError,
  type ErrorCode,
  type ErrorDetails,
  type WireError,
} from "../../contracts/errors.ts";
export { ContentTypes, Headers, subjects, type Subjects } from "../../contracts/subjects.ts";
export { decode, encode, encodeJson, MAX_PAYLOAD_BYTES } from "../../contracts/envelope.ts";
