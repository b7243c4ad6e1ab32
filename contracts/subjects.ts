/**
 * Every NATS subject, queue group, stream, consumer and KV name of HADIS, built in one place.
 * Model names are validated as single subject tokens so a model can never widen a wildcard.
 */
import { ConfigurationError } from "./errors.ts";

/** Prefix of every HADIS subject; a deployment may run several systems side by side by changing it. */
export const DEFAULT_PREFIX = "hadis";

/** One subject token: what model names, worker ids and router ids are. */
export const TOKEN = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

/** The sender a heartbeat or load report's subject names: its last token (`hadis.heartbeat.worker.<id>`). */
export function senderOf(subject: string): string {
  return subject.slice(subject.lastIndexOf(".") + 1);
}

/** Throws unless `token` is safe as one subject token (no dots, spaces or wildcards). */
export function assertToken(token: string, what: string): string {
  if (!TOKEN.test(token)) throw new ConfigurationError(`${what} "${token}" is not a valid subject token`);
  return token;
}

/** Queue groups: the instances of one service share the work of a subject. */
export const QueueGroups = {
  router: "hadis-router",
  discriminator: "hadis-discriminator",
} as const;

/** Names of JetStream streams, consumers and KV buckets. */
export interface StreamNames {
  /** The work-queue stream holding every model's work items. */
  workStream: string;
  /** The durable pull consumer shared by the workers of one model. */
  workConsumer(model: string): string;
  /** The durable pull consumer of one worker's own queue (the artifact's random dispatch). */
  workerConsumer(workerId: string): string;
  /** KV bucket holding the plan. */
  planBucket: string;
  /** Key of the plan inside the plan bucket. */
  planKey: string;
  /** KV bucket remembering idempotency keys and their replies. */
  idempotencyBucket: string;
  /** KV bucket of work results of requests with an idempotency key (any router can pick them up). */
  resultsBucket: string;
  /** The stream keeping every job's events (progress and result), so a caller that reconnects finds them. */
  jobStream: string;
}

/** Subject builders for one prefix. */
export interface Subjects {
  readonly prefix: string;
  /** Public entry, request-reply. */
  generate: string;
  /** Discriminator request-reply. */
  judge: string;
  /** Work items for one model (JetStream work queue). */
  work(model: string): string;
  /**
   * Work items for one worker's own queue, under the artifact's random dispatch (four tokens, so
   * no model's subject, three tokens, ever matches it).
   */
  workerQueue(workerId: string): string;
  /** Every model's work subject, for the stream definition. */
  workAll: string;
  /** Results for one router instance. */
  results(routerId: string): string;
  /** Worker heartbeats. */
  workerHeartbeat(workerId: string): string;
  /** Every worker heartbeat. */
  workerHeartbeatAll: string;
  /** Router load reports (arrivals, in-flight). */
  routerStats(routerId: string): string;
  /** Every router stats report. */
  routerStatsAll: string;
  /** Plan broadcast (also kept in KV): carries the new epoch for fast pick-up. */
  planBroadcast: string;
  /** Control subject for one worker (e.g. status queries). */
  workerControl(workerId: string): string;
  /** Finished spans published by services for the local dashboard (msgpack array of span records). */
  telemetrySpans: string;
  /** The resource manager's plan query endpoint. */
  managerPlan: string;
  /**
   * JetStream's advisories (JSON, sent by the server) that an item of the work stream was
   * delivered max_deliver times and never acknowledged: the server will not deliver it again.
   */
  workGivenUp: string;
  /** Asynchronous jobs: submit a generate request, answered at once with the job's id (request-reply). */
  jobsSubmit: string;
  /** One event of a job (`queued`, `routed`, `light_done`, `judged`, `heavy_running`, `done`, `failed`), kept in the jobs stream. */
  jobEvent(jobId: string, kind: string): string;
  /** Every event of one job (a subscription or a stream filter). */
  jobEvents(jobId: string): string;
  /** Every event of every job: the jobs stream's subject (`hadis.jobs.submit` has one token fewer, so it is not kept). */
  jobEventsAll: string;
  readonly names: StreamNames;
}

/** Builds the subject set for a prefix (default `hadis`). */
export function subjects(prefix: string = DEFAULT_PREFIX): Subjects {
  assertToken(prefix, "prefix");
  const workStream = `${prefix.toUpperCase().replace(/-/g, "_")}_WORK`;
  return {
    prefix,
    generate: `${prefix}.generate`,
    judge: `${prefix}.judge`,
    work: (model) => `${prefix}.work.${assertToken(model, "model")}`,
    workerQueue: (workerId) => `${prefix}.work.w.${assertToken(workerId, "worker id")}`,
    workAll: `${prefix}.work.>`,
    results: (routerId) => `${prefix}.result.${assertToken(routerId, "router id")}`,
    workerHeartbeat: (workerId) => `${prefix}.heartbeat.worker.${assertToken(workerId, "worker id")}`,
    workerHeartbeatAll: `${prefix}.heartbeat.worker.*`,
    routerStats: (routerId) => `${prefix}.stats.router.${assertToken(routerId, "router id")}`,
    routerStatsAll: `${prefix}.stats.router.*`,
    planBroadcast: `${prefix}.plan`,
    workerControl: (workerId) => `${prefix}.control.worker.${assertToken(workerId, "worker id")}`,
    telemetrySpans: `${prefix}.telemetry.spans`,
    managerPlan: `${prefix}.manager.plan`,
    workGivenUp: `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${workStream}.*`,
    jobsSubmit: `${prefix}.jobs.submit`,
    jobEvent: (jobId, kind) => `${prefix}.jobs.${assertToken(jobId, "job id")}.${assertToken(kind, "job event")}`,
    jobEvents: (jobId) => `${prefix}.jobs.${assertToken(jobId, "job id")}.*`,
    jobEventsAll: `${prefix}.jobs.*.*`,
    names: {
      workStream,
      workConsumer: (model) => `work-${assertToken(model, "model")}`,
      workerConsumer: (workerId) => `worker-${assertToken(workerId, "worker id")}`,
      planBucket: `${prefix}-plan`,
      planKey: "current",
      idempotencyBucket: `${prefix}-idempotency`,
      resultsBucket: `${prefix}-results`,
      jobStream: `${prefix.toUpperCase().replace(/-/g, "_")}_JOBS`,
    },
  };
}

/** NATS micro-service names (as seen by `$SRV.PING|INFO|STATS`). */
export const ServiceNames = {
  router: "hadis-router",
  worker: "hadis-worker",
  discriminator: "hadis-discriminator",
  resourceManager: "hadis-resource-manager",
} as const;
/** One of the four service kinds. */
export type ServiceName = (typeof ServiceNames)[keyof typeof ServiceNames];

/**
 * The inbox prefix of a role's connections when it logs in as its own user (`_INBOX_router`, …):
 * replies, pull deliveries and watches addressed to a role land under it, so the secured
 * accounts (ops/nats/accounts.conf) grant each role its own inboxes and clients only `_INBOX.>`.
 */
export const inboxPrefixOf = (role: string): string => `_INBOX_${assertToken(role, "role")}`;

/** Header names used on the wire. */
export const Headers = {
  contentType: "Content-Type",
  serviceError: "Nats-Service-Error",
  serviceErrorCode: "Nats-Service-Error-Code",
  traceparent: "traceparent",
  tracestate: "tracestate",
  msgId: "Nats-Msg-Id",
  /**
   * On each reply to a request that asked for a preview: `false` on the preview, `true` on the
   * last message (an error reply included). A client of any language reads replies until one that
   * does not say `false`.
   */
  final: "Hadis-Final",
} as const;

/** Content types accepted on `hadis.generate`. */
export const ContentTypes = {
  msgpack: "application/msgpack",
  json: "application/json",
} as const;
