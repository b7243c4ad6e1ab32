/**
 * Composes the services: what `npm start` runs in one process, and what the integration tests
 * and benchmarks start against their own nats-server. Each service has its own connection, as it
 * would in its own process.
 */
import { inboxPrefixOf, subjects as buildSubjects, type Subjects } from "../contracts/subjects.ts";
import { WORKER_SILENT_AFTER_MS } from "../contracts/messages.ts";
import { ProfileJudge } from "../actors/judge/profile-judge.ts";
import { ProfileGenerationBackend } from "../actors/worker/profile-backend.ts";
import { routerScoring, type ScorerKind } from "./files/router-scoring.ts";
import { ReferenceFeatureScorer } from "../actors/routing/difficulty.ts";
import type { StaticConfig } from "../actors/control/static-policy.ts";
import { createLogger, type Logger } from "./telemetry/log.ts";
import {
  connectWhenUp,
  isJetStreamNotReady,
  NATS_WAIT_RETRY_MS,
  type NatsConnection,
  type NatsCredentials,
  type NatsTlsFiles,
} from "./nats/connection.ts";
import { DEFAULT_WORK_QUEUE, WorkQueue, type WorkQueueOptions } from "./nats/work-queue.ts";
import { openPlanBucket, openResultsBucket } from "./nats/kv-buckets.ts";
import { maxPayloadWarning } from "./nats/replies.ts";
import { loadProfiles } from "./files/profiles.ts";
import { retryWhile, sleep, type RunningService } from "./lifecycle/running.ts";
import { startRouter, type RunningRouter } from "./router/main.ts";
import { startWorkers, type RunningWorkers } from "./worker/main.ts";
import { startDiscriminator } from "./discriminator/main.ts";
import { startResourceManager, type RunningResourceManager } from "./resource-manager/main.ts";
import { createPolicy, hasFixedModels } from "./resource-manager/policies.ts";
import { DEFAULT_POLICY } from "./resource-manager/policy-names.ts";
import { tickObserver } from "./resource-manager/observe.ts";
import { createHighsSolver } from "./solver/highs-solver.ts";
import { plannerWarmupLp } from "../actors/planner/milp.ts";
import { QUEUE_SAFETY } from "../actors/planner/snapshot.ts";
import { NATIVE, type Fidelity } from "../actors/artifact/mechanisms.ts";
import { policyFor, usesArtifactAllocator } from "../actors/artifact/policies.ts";
import { plannerView } from "../actors/artifact/runtimes.ts";
import { ArtifactRouterThreshold } from "../actors/artifact/worker-rules.ts";

export { DEFAULT_POLICY };
import { ConnectionReadiness, healthOf, type Health, type HealthCheck } from "./telemetry/health.ts";

import { SERVICE_KINDS, type ServiceKind } from "../contracts/service-kinds.ts";
import { ConfigurationError, DependencyError } from "../contracts/errors.ts";

export { SERVICE_KINDS, type NatsCredentials, type ServiceKind };

/** Options of a composed system (every field has a default). */
export interface SystemOptions {
  /** One server URL, or every URL of a cluster (the client fails over between them). */
  natsUrl: string | string[];
  /**
   * How long each service waits for a NATS server that is not up yet (nothing listening, a name
   * not resolving yet, no answer) before it fails, trying again every second; 0 (the default):
   * fail at once. Refused credentials or TLS fail at once either way.
   */
  natsWaitMs?: number;
  /** NATS user and password of each service's connection (a user per role, see ops/nats/accounts.conf); none when absent. */
  credentials?: (service: ServiceKind) => NatsCredentials | undefined;
  /** TLS files of every service's connection (a CA to trust; a client certificate and key for mutual TLS). */
  tls?: NatsTlsFiles;
  /** JetStream replicas of the work stream and the plan bucket (3 on a 3-node cluster; default 1). */
  replicas?: number;
  /** Which services to run here (default: all four). */
  services?: readonly ServiceKind[];
  profilesDir?: string;
  /** The analyzer's score weights (default: the profiles folder's analyzer/router-weights.json). */
  analyzerWeights?: string;
  /** Worker (GPU) count. */
  workers?: number;
  /** Router instances. */
  routers?: number;
  /** Multiplies every profiled latency (0.1 = the paper's 10x compression). */
  timeScale?: number;
  /** Profile backends that do not wait at all (overhead benchmarks). */
  zeroLatency?: boolean;
  /** `profile` (default) emulates GPUs from profiles; `onnx` runs real ONNX pipelines. */
  backend?: "profile" | "onnx";
  /**
   * Workers judge the light images they make and send the verdict with the image; routers ask
   * them to (default: on for the profile backend, off for onnx, docs/design.md). Off: every
   * verdict is the discriminator's.
   */
  judgeOnWorker?: boolean;
  /** For the onnx backend: the model map file and the folder of model exports. */
  onnx?: { modelMap?: string; modelsDir: string; maxResident?: number; warmUp?: boolean };
  policy?: string;
  staticConfig?: StaticConfig;
  /** The router's difficulty score: the prompt analyzer (default), the reference features of known prompts, or the learned model. */
  scorer?: ScorerKind;
  /** The learned scorer's model file (default: the profiles folder's analyzer/difficulty-model.json). */
  difficultyModel?: string;
  /** Resource manager tick, ms (default 20 s × time scale, at least 0.5 s). */
  tickMs?: number;
  /** Half-life of the demand EWMA, ms (default 20 s × time scale, at least 1 s). */
  demandHalfLifeMs?: number;
  workQueue?: Partial<WorkQueueOptions>;
  /** How long a router waits for the judge's verdict before it serves the light image unjudged, ms (default 10 s). */
  judgeTimeoutMs?: number;
  subjectPrefix?: string;
  workerIdPrefix?: string;
  log?: Logger;
  /**
   * The whole system starts here with its own nats-server (`npm start`): nothing was served while
   * the server was down, so the demand estimate of the plan it finds is not taken up.
   */
  coldStart?: boolean;
  /**
   * The paper artifact's mechanisms to run under (default none: our design). The resource manager
   * plans with the artifact's allocators and signals and stamps the mechanisms on its plans; routers
   * and workers follow the plan in force (docs/benchmarks.md).
   */
  fidelity?: Fidelity;
}

/** A running system. */
export interface RunningSystem {
  subjects: Subjects;
  routers: RunningRouter[];
  workers?: RunningWorkers;
  manager?: RunningResourceManager;
  /** Stops in order: intake first (routers), then the manager, workers, judge; closes connections. */
  stop(graceMs?: number): Promise<void>;
  /** Readiness: NATS connections up, every router holding a plan, not stopping (what `/readyz` answers). */
  health(): Health;
}

/** Starts the selected services against a NATS server. */
export async function startSystem(opts: SystemOptions): Promise<RunningSystem> {
  const kinds = new Set(opts.services ?? SERVICE_KINDS);
  const subjects = buildSubjects(opts.subjectPrefix);
  const profiles = loadProfiles(opts.profilesDir);
  const timeScale = opts.timeScale ?? profiles.pool.defaultTimeScale;
  const sloMs = profiles.pool.sloMs * timeScale;
  const queueOptions = { ...DEFAULT_WORK_QUEUE, ...(opts.replicas ? { replicas: opts.replicas } : {}), ...opts.workQueue };
  const connections: NatsConnection[] = [];
  const watches: ConnectionReadiness[] = [];
  let stopping = false;
  let planBucketReady = !opts.replicas || opts.replicas <= 1;
  let resultsBucketReady = planBucketReady;
  const connect = async (name: string, kind: ServiceKind) => {
    const credentials = opts.credentials?.(kind);
    // A role's own user reads only its own inboxes (ops/nats/accounts.conf); a user shared by
    // every service keeps the default inboxes.
    const extra = {
      ...(credentials
        ? { user: credentials.user, pass: credentials.pass, ...(credentials.ownRole ? { inboxPrefix: inboxPrefixOf(kind) } : {}) }
        : {}),
      ...(opts.tls ? { tls: opts.tls } : {}),
    };
    const waitMs = opts.natsWaitMs ?? 0;
    const waiting = (err: unknown) =>
      logFor(kind).warn("nats.waiting", { service: name, url: opts.natsUrl, error: (err as Error).message, waitMs });
    const nc = await connectWhenUp(opts.natsUrl, name, extra, waitMs, waiting).catch((err: unknown) => {
      throw new DependencyError(
        `${name} cannot reach NATS at ${opts.natsUrl} (${(err as Error).message})${credentials ? `; are the credentials of ${credentials.user} right?` : ""}`,
        { cause: err },
      );
    });
    connections.push(nc);
    watches.push(new ConnectionReadiness(nc, name));
    // Said once, by the first connection: images over a stock server's 1 MiB would fail.
    const small = connections.length === 1 ? maxPayloadWarning(nc) : null;
    if (small) logFor(kind).warn("nats.max_payload_small", { message: small });
    // Every PlanView opens the bucket with one replica: create it replicated first (it keeps its config).
    if (!planBucketReady) {
      await openPlanBucket(nc, subjects, opts.replicas);
      planBucketReady = true;
    }
    // The keyed results too (a retry through another router must find them after a node dies),
    // by a role allowed to touch them.
    if (!resultsBucketReady && (kind === "router" || kind === "worker")) {
      await openResultsBucket(nc, subjects, opts.replicas);
      resultsBucketReady = true;
    }
    return nc;
  };
  const logFor = (service: string) => opts.log ?? createLogger(service);
  // On for the profile backend, where a judge costs nothing; each onnx worker would load a CLIP session of its own.
  const judgeOnWorker = opts.judgeOnWorker ?? opts.backend !== "onnx";
  const profileJudge = (backendOf?: () => ProfileGenerationBackend | undefined) =>
    new ProfileJudge(profiles, {
      latencyMs: opts.zeroLatency ? 0 : profiles.pool.judge.latencyMs * timeScale,
      // Under the artifact's latency the batch already slept its judging (`ARTIFACT_JUDGE_MS`): not twice.
      sleep: (ms) => (backendOf?.()?.artifact.latency ? Promise.resolve() : sleep(ms)),
    });
  const started: { kind: ServiceKind; service: RunningService }[] = [];
  const closers: (() => Promise<void>)[] = [];
  // Loaded only for the onnx backend: a profile-driven process never loads the ONNX side.
  const onnx =
    opts.backend === "onnx" ? await (await import("./onnx/setup.ts")).prepareOnnx(opts.onnx ?? { modelsDir: ".hadis/models" }) : null;
  // A pool model the map has no export for would be planned onto workers that can never load it:
  // they would count as its capacity while its requests wait out their deadlines.
  const unmapped = onnx && kinds.has("worker") ? profiles.pool.models.filter((m) => !onnx.models.includes(m)) : [];
  if (unmapped.length > 0) {
    throw new ConfigurationError(
      `the ONNX model map has no export for ${unmapped.join(", ")}, which the profile pool has: map every pool model, or serve a profiles folder without ${unmapped.length === 1 ? "it" : "them"}`,
    );
  }
  const system: RunningSystem = {
    subjects,
    routers: [],
    async stop(graceMs = 10_000) {
      stopping = true;
      const order: ServiceKind[] = ["router", "resource-manager", "worker", "discriminator"];
      for (const kind of order) {
        await Promise.all(started.filter((s) => s.kind === kind).map((s) => s.service.stop(graceMs)));
      }
      await Promise.all(connections.map((nc) => nc.drain().catch(() => nc.close())));
      await Promise.all(closers.map((close) => close().catch(() => undefined)));
    },
    health() {
      const down = watches.map((w) => w.problem()).filter((problem) => problem !== null);
      const checks: Record<string, HealthCheck> = {
        nats: down.length === 0 ? { ok: true, detail: `${watches.length} connections up` } : { ok: false, detail: down.join("; ") },
        stopping: { ok: !stopping, detail: stopping ? "stopping" : "no" },
      };
      if (system.routers.length > 0) {
        const epochs = system.routers.flatMap((r) => (r.plans.current ? [r.plans.current.epoch] : []));
        checks.plan =
          epochs.length === system.routers.length
            ? { ok: true, detail: `epoch ${Math.min(...epochs)}` }
            : { ok: false, detail: "no plan yet: a router without one answers no_capacity" };
      }
      return healthOf(checks);
    },
  };

  try {
    if (kinds.has("resource-manager")) {
      const nc = await connect("hadis-resource-manager", "resource-manager");
      const policyName = opts.policy ?? DEFAULT_POLICY;
      const solver = createHighsSolver({ warmupLp: plannerWarmupLp(profiles) });
      closers.push(() => solver.close());
      const fidelity = opts.fidelity ?? NATIVE;
      const manager = await startResourceManager({
        nc,
        subjects,
        queue: await WorkQueue.open(nc, subjects, queueOptions),
        fidelity,
        tick: {
          policyName,
          policy: usesArtifactAllocator(policyName, fidelity)
            ? policyFor(policyName, fidelity)
            : createPolicy(policyName, profiles, opts.staticConfig),
          profiles: plannerView(profiles, fidelity.on.has("latency"), timeScale),
          solve: (lp, o) => solver.solve(lp, o),
          sloMs,
          timeScale,
          queueSafety: QUEUE_SAFETY,
          admissionHeadroom: 0.8,
          fixedModels: hasFixedModels(policyName),
        },
        // The paper re-plans every few seconds of its (compressed) trace time.
        tickMs: opts.tickMs ?? Math.max(500, 20_000 * timeScale),
        demandHalfLifeMs: opts.demandHalfLifeMs ?? Math.max(1_000, 20_000 * timeScale),
        silentAfterMs: WORKER_SILENT_AFTER_MS,
        log: logFor("resource-manager"),
        onTick: tickObserver(nc),
        ...(opts.coldStart ? { coldStart: true } : {}),
      });
      system.manager = manager;
      started.push({ kind: "resource-manager", service: manager });
    }
    if (kinds.has("discriminator")) {
      const nc = await connect("hadis-discriminator", "discriminator");
      const judge = onnx ? await onnx.judge() : profileJudge();
      started.push({
        kind: "discriminator",
        service: await startDiscriminator({ nc, subjects, judge, models: profiles.pool.models, log: logFor("discriminator") }),
      });
    }
    if (kinds.has("worker")) {
      const nc = await connect("hadis-worker", "worker");
      const profileBackends: ProfileGenerationBackend[] = [];
      const workers = await startWorkers({
        nc,
        subjects,
        queue: await WorkQueue.open(nc, subjects, queueOptions),
        count: opts.workers ?? 16,
        idPrefix: opts.workerIdPrefix,
        backend: (i) =>
          onnx
            ? onnx.generationBackend()
            : (profileBackends[i] = new ProfileGenerationBackend({
                models: profiles.byName,
                timeScale,
                sleep: (ms) => sleep(ms),
                zeroLatency: opts.zeroLatency,
              })),
        ...(judgeOnWorker ? { judge: (i: number) => (onnx ? onnx.judge() : profileJudge(() => profileBackends[i])) } : {}),
        ...(onnx || opts.zeroLatency ? {} : { timeScale }),
        log: logFor("worker"),
      });
      system.workers = workers;
      started.push({ kind: "worker", service: workers });
    }
    if (kinds.has("router")) {
      const files = {
        ...(opts.profilesDir ? { profilesDir: opts.profilesDir } : {}),
        ...(opts.analyzerWeights ? { weightsPath: opts.analyzerWeights } : {}),
        ...(opts.difficultyModel ? { difficultyModelPath: opts.difficultyModel } : {}),
      };
      const { scorer, threshold } = routerScoring(opts.scorer ?? "analyzer", profiles, files);
      // Unless a scorer is named, hadis-plus's plans are routed by the learned model (`defaultScorerFor`).
      const learnedScoring = opts.scorer ? undefined : routerScoring("learned", profiles, files);
      // The artifact's router (reference features, its percentile rule), used while a plan runs its `hadis` mechanism.
      const reference = new ReferenceFeatureScorer(profiles);
      const artifactScoring = { scorer: reference, threshold: new ArtifactRouterThreshold(reference.referenceScores) };
      for (let i = 0; i < (opts.routers ?? 1); i++) {
        const nc = await connect("hadis-router", "router");
        const router = await startRouter({
          nc,
          subjects,
          queue: await WorkQueue.open(nc, subjects, queueOptions),
          scorer,
          threshold,
          artifactScoring,
          ...(learnedScoring ? { learnedScoring } : {}),
          defaultSloMs: sloMs,
          rangesOf: (model) => profiles.byName.get(model) ?? { name: model },
          jobs: { replicas: queueOptions.replicas, storage: queueOptions.storage },
          log: logFor("router"),
          ...(opts.judgeTimeoutMs !== undefined ? { judgeTimeoutMs: opts.judgeTimeoutMs } : {}),
          ...(judgeOnWorker ? {} : { workerVerdicts: false }),
        });
        system.routers.push(router);
        started.push({ kind: "router", service: router });
      }
    }
  } catch (err) {
    await system.stop(1_000);
    throw err;
  }
  return system;
}

/**
 * `startSystem`, started again every second for up to `natsWaitMs` while its JetStream is not
 * ready (`isJetStreamNotReady`: a cluster started with the services has no leader yet): the
 * connection wait alone covers a server not listening yet, not one that listens before its
 * JetStream answers. Each failed start stops what it had started. `onWaiting` hears of the first.
 */
export function startSystemWhenUp(opts: SystemOptions & { onWaiting?: (what: string) => void }): Promise<RunningSystem> {
  const waiting = (err: unknown) => {
    const what = (err as Error).message;
    (opts.log ?? createLogger("system")).warn("nats.jetstream_waiting", { url: opts.natsUrl, error: what, waitMs: opts.natsWaitMs });
    opts.onWaiting?.(what);
  };
  return retryWhile(
    (leftMs) => startSystem({ ...opts, natsWaitMs: leftMs }),
    isJetStreamNotReady,
    opts.natsWaitMs ?? 0,
    NATS_WAIT_RETRY_MS,
    waiting,
  );
}
