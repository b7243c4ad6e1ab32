/**
 * The worker service: N GPU workers in one process, each a WorkerAgent bound to the JetStream
 * work queue, following the plan, heart-beating its state.
 */
import { encode } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import type { RefusedWorkItem } from "../../contracts/work-items.ts";
import { isKeyed, resultKey } from "../../actors/request/idempotent.ts";
import { PROTOCOL_VERSION, type WorkResult } from "../../contracts/messages.ts";
import { ServiceNames, type Subjects } from "../../contracts/subjects.ts";
import type { GenerationBackend, JudgeBackend } from "../../actors/worker/backend.ts";
import { errorResult, WorkerAgent, type WorkerOptions } from "../../actors/worker/worker-agent.ts";
import type { Logger } from "../telemetry/log.ts";
import { newInbox, sendWhenUp, type NatsConnection } from "../nats/connection.ts";
import type { WorkQueue } from "../nats/work-queue.ts";
import { openResultsBucket } from "../nats/kv-buckets.ts";
import { isPayloadTooLarge, payloadTooLarge, startService } from "../nats/replies.ts";
import { recordSwaps, recordWorkers } from "../telemetry/metrics.ts";
import { ServiceTelemetry, spanClockMs } from "../telemetry/tracing.ts";
import { workerObserver } from "./tracing.ts";
import { PlanView } from "../nats/plan-view.ts";
import { sleep, within, type RunningService } from "../lifecycle/running.ts";

/** Worker service options. */
export interface WorkersOptions {
  nc: NatsConnection;
  subjects: Subjects;
  queue: WorkQueue;
  /** How many workers (GPUs) this process runs. */
  count: number;
  /** One backend per worker (a GPU holds its own models). */
  backend: (index: number) => GenerationBackend;
  /**
   * One judge per worker, to judge the light images it makes where they are (items that ask for
   * a verdict); absent: the workers judge nothing and routers ask the discriminator.
   */
  judge?: (index: number) => JudgeBackend | Promise<JudgeBackend>;
  log: Logger;
  /** Worker ids are `<idPrefix>-<index>`. */
  idPrefix?: string;
  heartbeatEveryMs?: number;
  agent?: Partial<WorkerOptions>;
  /** The time scale of profile-driven backends: a plan made for another is warned of, once a scale. */
  timeScale?: number;
  version?: string;
}

/** Running workers. */
export interface RunningWorkers extends RunningService {
  readonly agents: readonly WorkerAgent[];
}

/** Starts `count` workers. */
export async function startWorkers(opts: WorkersOptions): Promise<RunningWorkers> {
  const { nc, subjects, log } = opts;
  const prefix = opts.idPrefix ?? `w-${newInbox().slice(-8)}`;
  const { view: plans } = await PlanView.open(nc, subjects, log);
  const results = await openResultsBucket(nc, subjects);
  const backends: GenerationBackend[] = [];
  const agents: WorkerAgent[] = [];
  const judges: JudgeBackend[] = [];
  try {
    for (let i = 0; opts.judge && i < opts.count; i++) judges.push(await opts.judge(i));
  } catch (err) {
    plans.close();
    await Promise.all(judges.map((j) => j.close().catch(() => undefined)));
    throw err;
  }
  const telemetry = new ServiceTelemetry(ServiceNames.worker, nc, prefix);
  const observer = workerObserver(telemetry, subjects, judges[0]?.kind);
  const publishResult = (replyTo: string, result: WorkResult): void =>
    // A result published while the connection is down would be dropped (its router would wait for
    // the item to run again after the ack wait): it is sent once the connection is back.
    sendWhenUp(
      nc,
      () => sendResult(replyTo, result),
      () => log.warn("worker.result_publish_failed", { requestId: result.requestId, error: "not connected to NATS" }),
    );
  const sendResult = (replyTo: string, result: WorkResult): void => {
    const data = encode(result);
    try {
      nc.publish(replyTo, data);
    } catch (err) {
      if (result.ok && isPayloadTooLarge(err)) {
        // The image is over the server's limit: the router hears why now, not at its deadline.
        log.warn("worker.result_too_large", { requestId: result.requestId, bytes: data.byteLength, maxPayload: nc.info?.max_payload });
        return sendResult(replyTo, errorResult(result, result.workerId, payloadTooLarge(`the ${result.model} image`, data.byteLength)));
      }
      // A closing connection: the router's deadline answers the request.
      log.warn("worker.result_publish_failed", { requestId: result.requestId, error: (err as Error).message });
      return;
    }
    // Keyed requests: any router retrying the request picks the image up from the bucket.
    // Not a failure: a retry is meant to try again, not to read the old error.
    if (result.ok && isKeyed(result.requestId)) {
      void results
        .put(resultKey(result.requestId, result.stage), data)
        .catch((err) => log.warn("worker.result_store_failed", { error: (err as Error).message }));
    }
  };
  /** Items the queue refused to each worker (they did not read): counted with its drops. */
  const malformed = new Map<string, number>();
  /** Tells the router of an item that did not read why, when the item says where to (not at the deadline). */
  const refuse = (workerId: string, { error, address }: RefusedWorkItem) => {
    malformed.set(workerId, (malformed.get(workerId) ?? 0) + 1);
    log.info("worker.drop", { workerId, reason: "malformed", error: error.message });
    // An internal error to its caller: a router's bug or a field out of range, not the caller's fault.
    if (address)
      publishResult(
        address.replyTo,
        errorResult(address, workerId, new HadisError("internal", `work item refused by worker ${workerId}: ${error.message}`)),
      );
  };
  for (let i = 0; i < opts.count; i++) {
    const backend = opts.backend(i);
    backends.push(backend);
    const id = `${prefix}-${String(i).padStart(2, "0")}`;
    agents.push(
      new WorkerAgent(
        id,
        {
          source: {
            pull: (model, max, waitMs, signal, lastCalledOff) =>
              opts.queue.pull(model, max, waitMs, signal, lastCalledOff, (item) => refuse(id, item)),
          },
          publishResult,
          observer,
          backend,
          ...(judges[i] ? { judge: judges[i] } : {}),
          now: spanClockMs, // epoch ms on the spans' clock: a batch's spans start at its start
          sleep: (ms) => sleep(ms),
          log: (event, fields) => log.info(event, fields),
        },
        { pollMs: 1_000, workingEveryMs: 1_000, loadRetryMs: 2_000, ...opts.agent },
      ),
    );
  }
  const kind = backends[0]?.kind ?? "none";
  // Registered before anything starts: a registration that fails leaves only the backends to close.
  let service: Awaited<ReturnType<typeof startService>>;
  try {
    service = await startService(nc, {
      name: ServiceNames.worker,
      version: opts.version ?? "0.1.0",
      description: `HADIS workers (${opts.count} × ${kind} backend)`,
      metadata: {
        workers: agents.map((a) => a.id).join(","),
        backend: kind,
        protocol: String(PROTOCOL_VERSION),
        judge: judges[0]?.kind ?? "none",
      },
    });
  } catch (err) {
    plans.close();
    await Promise.all([...backends, ...judges].map((b) => b.close().catch(() => undefined)));
    throw err;
  }
  let warnedScale: number | undefined;
  plans.onPlan((plan) => {
    // Judged on a plan that gives these workers work: one that does not may be an earlier run's,
    // about to be replaced by a manager planning afresh, and says nothing of this system's scale.
    const ours = agents.some((a) => plan.assignment[a.id] !== undefined);
    if (ours && opts.timeScale !== undefined && plan.timeScale !== opts.timeScale && plan.timeScale !== warnedScale) {
      // Its workers would run every batch at another speed than the plan counts on (ten times slower
      // for a worker at 1 in a system at 0.1), and requests would miss the SLO with no other sign.
      warnedScale = plan.timeScale;
      log.warn("worker.time_scale_differs", {
        plan: plan.timeScale,
        workers: opts.timeScale,
        hint: `start the workers with --time-scale ${plan.timeScale}`,
      });
    }
    agents.forEach((a) => a.applyPlan(plan));
  });
  agents.forEach((a) => a.start());

  const swapsSeen = new Map<string, number>();
  const beat = () => {
    const statuses = agents.map((a) => a.status(kind));
    for (const status of statuses) {
      recordSwaps(status.swapsTotal - (swapsSeen.get(status.workerId) ?? 0));
      swapsSeen.set(status.workerId, status.swapsTotal);
      nc.publish(subjects.workerHeartbeat(status.workerId), encode(status));
    }
    recordWorkers(statuses);
  };
  beat();
  const heartbeat = setInterval(beat, opts.heartbeatEveryMs ?? 1_000);
  heartbeat.unref();

  service.addEndpoint("status", {
    subject: subjects.workerControl(prefix),
    handler: (_err, msg) =>
      msg.respond(encode(agents.map((a) => ({ ...a.status(kind), dropped: { ...a.dropped, malformed: malformed.get(a.id) ?? 0 } })))),
  });
  log.info("workers.started", { count: opts.count, prefix, backend: kind, judge: judges[0]?.kind ?? "none" });

  return {
    name: ServiceNames.worker,
    agents,
    async stop(graceMs = 10_000) {
      clearInterval(heartbeat);
      plans.close();
      const done = await within(Promise.all(agents.map((a) => a.stop())), graceMs);
      if (!done) log.warn("workers.stop_grace_exceeded", {});
      // Last word: the workers are gone, so the resource manager need not wait for silence.
      beat();
      await service.stop().catch(() => undefined);
      await telemetry.close();
      await Promise.all([...backends, ...judges].map((b) => b.close().catch(() => undefined)));
      log.info("workers.stopped", { prefix });
    },
  };
}
