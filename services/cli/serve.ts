/** `hadis start` and `hadis serve`: run the system (embedded) or one service against a NATS URL. */
import { join, resolve } from "node:path";
import { startNatsServer, type LocalServer } from "../nats/server.ts";
import { createLogger, type Logger } from "../telemetry/log.ts";
import { connectNats } from "../nats/connection.ts";
import { startMetricsServer } from "../telemetry/metrics.ts";
import { STARTING, type Health } from "../telemetry/health.ts";
import { DEFAULT_DASHBOARD_PORT, startDashboard } from "../dashboard/main.ts";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { credentialsFromEnv, natsServerOf, natsTlsFromEnv, natsUrls } from "./credentials.ts";
import { startSystem, startSystemWhenUp, SERVICE_KINDS, type RunningSystem, type ServiceKind } from "../system.ts";
import { createPolicy, staticConfigFor } from "../resource-manager/policies.ts";
import { DEFAULT_PROFILES_DIR, loadProfiles } from "../files/profiles.ts";
import { ANALYZER_PATHS, loadDifficultyModel, loadScoreModel } from "../files/analyzer-files.ts";
import type { ScorerKind } from "../files/router-scoring.ts";
import { describeLoad, whenModelsLoaded } from "./models-ready.ts";
import { describeProblem, telemetryEnvProblems } from "../telemetry/config.ts";
import { gatewayCommand, startLocalGateway, type GatewayCliOptions, type LocalGateway } from "./gateway.ts";
import { describeResume } from "../resource-manager/resume.ts";
import type { StaticConfig } from "../../actors/control/static-policy.ts";
import { ConfigurationError } from "../../contracts/errors.ts";
import { parseFidelity } from "../../actors/artifact/mechanisms.ts";

/** Options shared by `start` and `serve`. */
export interface RunOptions {
  workers: number;
  routers: number;
  timeScale?: number;
  policy: string;
  backend: string;
  zeroLatency?: boolean;
  idPrefix?: string;
  profiles?: string;
  storage: "file" | "memory";
  /** JSON of a StaticConfig for the static policy. */
  staticConfig?: string;
  scorer: ScorerKind;
  analyzerWeights?: string;
  difficultyModel?: string;
  /** onnx backend: model map file and export folder. */
  modelMap?: string;
  modelsDir?: string;
  /** `native` (default) or `artifact`: the paper artifact's mechanisms, which the resource manager puts in its plans. */
  fidelity?: string;
  /** Artifact mechanisms on (or `-name` off) on top of the fidelity. */
  mechanisms?: string;
  /** `on`, `off`, or `auto` (the backend's default): workers judge the light images they make. */
  judgeOnWorker?: string;
}

/**
 * The static configuration asked for, checked before anything starts, with the router's weights
 * file when a router is among what starts and the policy's models when a resource manager is: a
 * bad one ends the command (exit 2).
 */
function checkedConfigOf(opts: RunOptions, command: string, starts: { router: boolean; manager: boolean }): StaticConfig | undefined {
  // Telemetry first: an OTLP endpoint that cannot be used ends the command here, named, instead
  // of failing later on some other path (it used to be blamed on the dashboard's port).
  const telemetryProblems = telemetryEnvProblems();
  if (telemetryProblems.length > 0) {
    for (const p of telemetryProblems) process.stderr.write(`hadis ${command}: ${describeProblem(p)}\n`);
    process.exit(2);
  }
  try {
    if (starts.router && opts.scorer !== "reference" && opts.analyzerWeights !== undefined) loadScoreModel(opts.analyzerWeights);
    // (No scorer named: the router holds the learned model too, for hadis-plus's plans.)
    if (starts.router && opts.scorer !== "analyzer" && opts.scorer !== "reference")
      loadDifficultyModel(opts.difficultyModel ?? join(opts.profiles ?? DEFAULT_PROFILES_DIR, ANALYZER_PATHS.difficultyModel));
    const config = staticConfigFor(opts.policy, opts.staticConfig);
    if (starts.manager) createPolicy(opts.policy, loadProfiles(opts.profiles), config);
    return config;
  } catch (err) {
    process.stderr.write(`hadis ${command}: ${(err as Error).message}\n`);
    process.exit(2);
  }
}

/** The services each `serve` option is read by (one missing here is read by every service). */
const READ_BY: Partial<Record<keyof RunOptions | keyof GatewayCliOptions | "replicas", readonly (ServiceKind | "gateway")[]>> = {
  httpPort: ["gateway"],
  httpHost: ["gateway"],
  httpMaxBodyBytes: ["gateway"],
  httpMaxConcurrent: ["gateway"],
  timeScale: ["router", "worker", "discriminator", "resource-manager"],
  replicas: ["router", "worker", "discriminator", "resource-manager"],
  workers: ["worker"],
  idPrefix: ["worker"],
  routers: ["router"],
  scorer: ["router"],
  analyzerWeights: ["router"],
  difficultyModel: ["router"],
  policy: ["resource-manager"],
  staticConfig: ["resource-manager"],
  fidelity: ["resource-manager"],
  mechanisms: ["resource-manager"],
  backend: ["worker", "discriminator"],
  zeroLatency: ["worker", "discriminator"],
  judgeOnWorker: ["router", "worker"],
  modelMap: ["worker", "discriminator"],
  modelsDir: ["worker", "discriminator"],
  storage: ["router", "worker", "resource-manager"],
};

/**
 * What `hadis serve <kind>` says of options given on the command line that the service does not
 * read (`--workers` on `serve router`): one warning each, naming the services that do. Warned, not
 * refused: one set of flags shared by every service's command line is a common way to deploy.
 */
export function unreadOptions(kind: string, given: readonly { key: string; flag: string }[]): string[] {
  if (kind === "all") return [];
  return given.flatMap(({ key, flag }) => {
    const readers = READ_BY[key as keyof typeof READ_BY];
    return readers && !readers.includes(kind as ServiceKind)
      ? [`${flag} does nothing for the ${kind} service (read by: ${readers.join(", ")})`]
      : [];
  });
}

/** Runs until SIGINT/SIGTERM, then stops in order and exits 0. */
function untilSignal(stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`\n${signal}: stopping…\n`);
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    void stop().then(() => process.exit(0));
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  // A closed terminal: the server, in a session of its own, would not get it.
  process.on("SIGHUP", () => onSignal("SIGHUP"));
}

function backendOptions(opts: RunOptions) {
  return {
    fidelity: parseFidelity(opts.fidelity, opts.mechanisms),
    scorer: opts.scorer,
    ...(opts.analyzerWeights ? { analyzerWeights: opts.analyzerWeights } : {}),
    ...(opts.difficultyModel ? { difficultyModel: opts.difficultyModel } : {}),
    backend: opts.backend as "profile" | "onnx",
    onnx: { modelMap: opts.modelMap, modelsDir: opts.modelsDir ?? ".hadis/models" },
    ...(opts.judgeOnWorker === "on" || opts.judgeOnWorker === "off" ? { judgeOnWorker: opts.judgeOnWorker === "on" } : {}),
  };
}

/** `hadis start`: a local nats-server plus every service, until Ctrl-C. */
export async function startCommand(
  opts: RunOptions &
    GatewayCliOptions & {
      port: number;
      dataDir: string;
      dashboardPort?: number;
      dashboardHost?: string;
      dashboard?: boolean;
      http?: boolean;
    },
): Promise<void> {
  const log = createLogger("start");
  const startedMs = performance.now();
  const staticConfig = checkedConfigOf(opts, "start", { router: true, manager: true });
  let server: LocalServer | undefined;
  let dashboard: Awaited<ReturnType<typeof startLocalDashboard>> | null = null;
  let gateway: LocalGateway | null = null;
  let system: RunningSystem | undefined;
  let stopping = false;
  // From the first moment: a signal while things still start stops what has started (the server
  // itself is killed on exit, whatever the path).
  untilSignal(async () => {
    stopping = true;
    await gateway?.stop(10_000); // intake first: HTTP callers get their answers before the routers stop
    await system?.stop(10_000);
    await dashboard?.stop();
    await server?.stop();
  });
  try {
    server = await startNatsServer({ port: opts.port, dataDir: resolve(opts.dataDir), ownSession: true });
  } catch (err) {
    process.stderr.write(`hadis start: ${(err as Error).message}\n`);
    process.exit(2);
  }
  // The embedded server is part of this system: if it dies, say so and stop, rather than keep
  // "serving" on the screen while every service reconnects to nothing.
  server.process.once("exit", (code, signal) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`hadis start: the embedded nats-server exited (${signal ?? `code ${code}`}); stopping\n`);
    setTimeout(() => process.exit(1), 10_000).unref();
    void (async () => {
      await gateway?.stop(2_000).catch(() => undefined);
      await system?.stop(2_000).catch(() => undefined);
      await dashboard?.stop().catch(() => undefined);
      process.exit(1);
    })();
  });
  // The dashboard first, so the first requests are already traced. One that cannot listen ends
  // the start, as a taken NATS port does: without it there is no /metrics and no probe.
  try {
    dashboard =
      opts.dashboard === false
        ? null
        : await startLocalDashboard(server.url, opts.dashboardPort, opts.dashboardHost, log, () => system?.health() ?? STARTING);
    // The HTTP gateway likewise: a taken port ends the start before any service runs.
    gateway = opts.http === false ? null : await startLocalGateway(server.url, opts, createLogger("gateway"));
  } catch (err) {
    process.stderr.write(`hadis start: ${(err as Error).message}\n`);
    stopping = true;
    await dashboard?.stop().catch(() => undefined);
    await server.stop();
    process.exit(2);
  }
  try {
    system = await startSystem({
      natsUrl: server.url,
      workers: opts.workers,
      routers: opts.routers,
      timeScale: opts.timeScale,
      policy: opts.policy,
      zeroLatency: opts.zeroLatency,
      profilesDir: opts.profiles,
      staticConfig,
      workQueue: { storage: opts.storage },
      coldStart: true,
      ...backendOptions(opts),
    });
  } catch (err) {
    process.stderr.write(`hadis start: ${(err as Error).message}\n`);
    stopping = true; // the server is stopped on purpose: not "the embedded nats-server exited"
    await gateway?.stop(1_000).catch(() => undefined);
    await dashboard?.stop().catch(() => undefined);
    await server.stop();
    process.exit(1);
  }
  log.info("start.ready", { nats: server.url, workers: opts.workers, policy: opts.policy, dataDir: server.dataDir });
  const resumed = system.manager ? describeResume(system.manager.resumed) : null;
  process.stdout.write(
    [
      `HADIS is serving hadis.generate on ${server.url}`,
      `  ${opts.workers} ${opts.backend === "onnx" ? "ONNX (real inference)" : "profile-driven"} workers, policy ${opts.policy}, time scale ${opts.timeScale ?? 1}`,
      ...(server.stoppedLeftover
        ? [
            `  stopped the nats-server (pid ${server.stoppedLeftover.pid}) an earlier start left running on this data dir when it was killed`,
          ]
        : []),
      ...(resumed ? [`  state from ${opts.dataDir}: ${resumed}`] : []),
      `  try:  npx hadis generate "a red bicycle" --nats ${server.url}`,
      ...(gateway ? [`        curl -d '{"prompt":"a red bicycle"}' ${gateway.url}v1/generate -H 'accept: image/png' -o bike.png`] : []),
      `        npx hadis status --nats ${server.url}`,
      dashboard ? `  dashboard: ${dashboard.url}   metrics: ${dashboard.url}metrics` : `  dashboard: off`,
      gateway ? `  HTTP API: ${gateway.url}v1/generate   OpenAPI: ${gateway.url}openapi.json` : `  HTTP API: off`,
      `  stop: Ctrl-C`,
      `  the workers are loading the plan's models; requests sent meanwhile wait in their queues (a line follows)`,
      "",
    ].join("\n"),
  );
  whenModelsLoaded(system, (models) => {
    const seconds = ((performance.now() - startedMs) / 1_000).toFixed(1);
    log.info("start.models_loaded", { seconds: Number(seconds), models });
    process.stdout.write(`HADIS models loaded ${seconds} s after start: ${describeLoad(models)}\n`);
  });
}

/** Starts the dashboard on its own connection; throws, saying what to do, when it cannot listen. */
async function startLocalDashboard(
  url: string,
  port: number | undefined,
  host: string | undefined,
  log: Logger,
  health: () => Health,
): Promise<{ url: string; stop(): Promise<void> }> {
  const nc = await connectNats(url, "hadis-dashboard");
  const listenPort = port ?? DEFAULT_DASHBOARD_PORT;
  try {
    const dash = await startDashboard({ nc, subjects: buildSubjects(), port: listenPort, host, log, health });
    return { url: dash.url, stop: async () => (await dash.stop(), await nc.drain().catch(() => undefined)) };
  } catch (err) {
    await nc.close();
    if ((err as { code?: string }).code === "EADDRINUSE") {
      throw new ConfigurationError(
        `dashboard port ${listenPort} on ${host ?? "127.0.0.1"} is already in use: pick another with --dashboard-port, or start without it (--no-dashboard)`,
        { cause: err },
      );
    }
    throw new ConfigurationError(
      `dashboard not started (${(err as Error).message}); pick another address with --dashboard-host or --dashboard-port, or --no-dashboard`,
      { cause: err },
    );
  }
}

/** `hadis serve <service>`: one service against an existing NATS server. */
export async function serveCommand(
  kind: string,
  opts: RunOptions &
    GatewayCliOptions & { nats?: string; metricsPort?: number; metricsHost?: string; replicas?: number; waitForNats?: number },
  given: readonly { key: string; flag: string }[] = [],
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  if (kind !== "all" && kind !== "gateway" && !SERVICE_KINDS.includes(kind as ServiceKind))
    throw new ConfigurationError(`unknown service "${kind}"; one of ${SERVICE_KINDS.join(", ")}, gateway, all`);
  // Which server: given, never guessed (a service joining whatever runs on 4222 serves someone else's system).
  const server = natsServerOf(opts.nats, env);
  let natsUrl: string | string[];
  try {
    if (!server)
      throw new ConfigurationError(
        "no NATS server given: pass --nats nats://host:4222 (comma-separated for a cluster) or set NATS_URL; `npm start` runs a server of its own",
      );
    natsUrl = natsUrls(server.value, server.source);
  } catch (err) {
    process.stderr.write(`hadis serve: ${(err as Error).message}\n`);
    return process.exit(2);
  }
  for (const line of unreadOptions(kind, given)) process.stderr.write(`hadis serve: warning: ${line}\n`);
  if (kind === "gateway") return gatewayCommand({ ...opts, nats: server.value }, untilSignal);
  const staticConfig = checkedConfigOf(opts, "serve", {
    router: kind === "router" || kind === "all",
    manager: kind === "resource-manager" || kind === "all",
  });
  let system: RunningSystem | undefined;
  // The metrics port first: a taken one fails before any service has joined (and pulled work).
  const metrics =
    opts.metricsPort !== undefined
      ? await startMetricsServer(opts.metricsPort, opts.metricsHost, () => system?.health() ?? STARTING).catch((err: unknown) => {
          const where = `${opts.metricsHost ?? "127.0.0.1"}:${opts.metricsPort}`;
          const why =
            (err as { code?: string }).code === "EADDRINUSE"
              ? `metrics port ${where} is already in use: pick another with --metrics-port`
              : `metrics not served on ${where} (${(err as Error).message}): pick another address with --metrics-host or --metrics-port`;
          process.stderr.write(`hadis serve: ${why}\n`);
          return process.exit(2);
        })
      : null;
  try {
    system = await startSystemWhenUp({
      ...backendOptions(opts),
      natsUrl,
      natsWaitMs: (opts.waitForNats ?? 0) * 1_000,
      credentials: credentialsFromEnv(),
      tls: natsTlsFromEnv(),
      replicas: opts.replicas,
      services: kind === "all" ? SERVICE_KINDS : [kind as ServiceKind],
      staticConfig,
      workers: opts.workers,
      routers: opts.routers,
      timeScale: opts.timeScale,
      policy: opts.policy,
      zeroLatency: opts.zeroLatency,
      workerIdPrefix: opts.idPrefix,
      profilesDir: opts.profiles,
      workQueue: { storage: opts.storage },
    });
  } catch (err) {
    await metrics?.stop();
    throw err;
  }
  const running = system;
  process.stderr.write(
    `hadis ${kind} connected to ${server.value}${server.source === "NATS_URL" ? " (NATS_URL)" : ""}${metrics ? `; metrics on ${metrics.url} (probes: /healthz, /readyz)` : ""}\n`,
  );
  untilSignal(async () => {
    await running.stop(10_000);
    await metrics?.stop();
  });
}
