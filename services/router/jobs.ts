/**
 * A router's asynchronous jobs (`hadis.jobs.submit`): a checked request is answered at once with
 * its job id, then runs as any generate request while its progress and its result (or typed
 * error) go to the jobs stream as events, in order.
 */
import { asHadisError, toWireError } from "../../contracts/errors.ts";
import { JobEventKinds, type JobAccepted, type JobEvent } from "../../contracts/jobs.ts";
import { PROTOCOL_VERSION, type GenerateReply } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import type { Encoding } from "../../contracts/envelope.ts";
import type { Progress } from "../../actors/request/progress.ts";
import type { Logger } from "../telemetry/log.ts";
import { newInbox, type ServiceMsg } from "../nats/connection.ts";
import type { JobStream } from "../nats/job-stream.ts";
import { replyWith } from "../nats/replies.ts";

/** One job as the router runs it: its events go out in order, each once the previous is kept. */
export interface JobRun {
  readonly jobId: string;
  /** Progress of the request (routed, light done, judged, heavy running). */
  progress(steps: readonly Progress[]): void;
  /** The preview a job that asked for one gets as it escalates: the `preview` event. */
  preview(reply: GenerateReply): void;
  /** The result: the `done` event. */
  done(reply: GenerateReply): Promise<void>;
  /** The typed error: the `failed` event. */
  failed(err: unknown): Promise<void>;
}

/**
 * Starts a job for a submission already checked: keeps its `queued` event (a stream that cannot
 * take it fails the submission, so no id is given for a job nobody can read), then answers the
 * submitter with the id. Later events are chained: each is published after the one before.
 */
export async function beginJob(
  msg: ServiceMsg,
  deps: { stream: JobStream; subjects: Subjects; log: Logger },
  encoding: Encoding,
  deadlineAtMs: number,
): Promise<JobRun> {
  const jobId = newInbox().slice(-22);
  let seq = 0;
  const event = <K extends JobEvent["kind"]>(
    kind: K,
    fields: Omit<Extract<JobEvent, { kind: K }>, "v" | "jobId" | "seq" | "atMs" | "kind">,
  ): JobEvent => ({ v: PROTOCOL_VERSION, jobId, seq: ++seq, atMs: Date.now(), kind, ...fields }) as unknown as JobEvent;
  await deps.stream.publish(event(JobEventKinds.queued, { deadlineAtMs }), encoding);
  const accepted: JobAccepted = {
    v: PROTOCOL_VERSION,
    jobId,
    events: deps.subjects.jobEvents(jobId),
    stream: deps.subjects.names.jobStream,
    deadlineAtMs,
  };
  replyWith(msg, accepted, encoding);
  let chain: Promise<void> = Promise.resolve();
  const publish = (e: JobEvent) => {
    chain = chain
      .then(() => deps.stream.publish(e, encoding))
      .catch((err: unknown) => deps.log.warn("router.job_event_lost", { jobId, kind: e.kind, error: (err as Error).message }));
    return chain;
  };
  return {
    jobId,
    progress(steps) {
      for (const step of steps) {
        const { kind, ...fields } = step;
        void publish(event(kind, fields as never));
      }
    },
    preview: (reply) => void publish(event(JobEventKinds.preview, { result: reply })),
    done: (reply) => publish(event(JobEventKinds.done, { result: reply })),
    failed: (err) => publish(event(JobEventKinds.failed, { error: toWireError(asHadisError(err), PROTOCOL_VERSION).error })),
  };
}
