/** `hadis serve gateway` and the gateway `hadis start` runs: the HTTP API on its own NATS connection. */
import { createServer as createNetServer } from "node:net";
import { createLogger, type Logger } from "../telemetry/log.ts";
import { connectWhenUp, type NatsConnection } from "../nats/connection.ts";
import { loadProfiles } from "../files/profiles.ts";
import { startMetricsServer } from "../telemetry/metrics.ts";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { DEFAULT_HTTP_PORT, startGateway, type RunningGateway } from "../gateway/main.ts";
import { natsTlsFromEnv, natsUrls, toolCredentials } from "./credentials.ts";
import { ConfigurationError, DependencyError } from "../../contracts/errors.ts";

/** The gateway's options on the command line. */
export interface GatewayCliOptions {
  httpPort?: number;
  httpHost?: string;
  httpMaxBodyBytes?: number;
  httpMaxConcurrent?: number;
  profiles?: string;
}

/** A gateway with the connection it owns. */
export interface LocalGateway {
  url: string;
  gateway: RunningGateway;
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts the gateway on a NATS connection of its own, as the client role (`HADIS_CLIENT_NATS_*`,
 * else `HADIS_NATS_*`): it is a NATS client like any other. Throws, saying what to do, when it
 * cannot listen.
 */
export async function startLocalGateway(
  nats: string | string[],
  opts: GatewayCliOptions & { waitForNatsMs?: number; version?: string },
  log: Logger = createLogger("gateway"),
): Promise<LocalGateway> {
  const host = opts.httpHost ?? "127.0.0.1";
  const port = opts.httpPort ?? DEFAULT_HTTP_PORT;
  // A taken port is said before waiting for NATS (which may take a minute).
  await portFree(host, port).catch((err: unknown) => {
    throw listenError(err, host, port);
  });
  const credentials = toolCredentials(process.env, "client");
  const tls = natsTlsFromEnv();
  const nc: NatsConnection = await connectWhenUp(
    nats,
    "hadis-gateway",
    { ...(credentials ?? {}), ...(tls ? { tls } : {}) },
    opts.waitForNatsMs ?? 0,
    (err) => log.warn("nats.waiting", { service: "hadis-gateway", url: nats, error: (err as Error).message, waitMs: opts.waitForNatsMs }),
  ).catch((err: unknown) => {
    throw new DependencyError(
      `hadis-gateway cannot reach NATS at ${nats} (${(err as Error).message})${credentials ? `; are the credentials of ${credentials.user} right?` : ""}`,
      { cause: err },
    );
  });
  try {
    const gateway = await startGateway({
      nc,
      subjects: buildSubjects(),
      profiles: loadProfiles(opts.profiles),
      log,
      port,
      host,
      ...(opts.httpMaxBodyBytes !== undefined ? { maxBodyBytes: opts.httpMaxBodyBytes } : {}),
      ...(opts.httpMaxConcurrent !== undefined ? { maxConcurrent: opts.httpMaxConcurrent } : {}),
      ...(opts.version ? { version: opts.version } : {}),
    });
    return {
      url: gateway.url,
      gateway,
      stop: async (graceMs = 10_000) => (await gateway.stop(graceMs), await nc.drain().catch(() => undefined)),
    };
  } catch (err) {
    await nc.close();
    throw listenError(err, host, port);
  }
}

/** Resolves when `host:port` can be listened on (port 0 always can), by listening and closing at once. */
function portFree(host: string, port: number): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once("error", reject);
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}

/** What to do about an address the gateway cannot listen on. */
function listenError(err: unknown, host: string, port: number): Error {
  if ((err as { code?: string }).code === "EADDRINUSE") {
    return new ConfigurationError(
      `HTTP port ${port} on ${host} is already in use: pick another with --http-port, or start without the gateway (--no-http)`,
      { cause: err },
    );
  }
  return new ConfigurationError(
    `HTTP gateway not started (${(err as Error).message}); pick another address with --http-host or --http-port`,
    { cause: err },
  );
}

/** `hadis serve gateway`: the HTTP gateway against a NATS server, until a signal. */
export async function gatewayCommand(
  opts: GatewayCliOptions & { nats: string; waitForNats?: number; metricsPort?: number; metricsHost?: string },
  untilSignal: (stop: () => Promise<void>) => void,
): Promise<void> {
  let local: LocalGateway;
  try {
    local = await startLocalGateway(natsUrls(opts.nats), { ...opts, waitForNatsMs: (opts.waitForNats ?? 0) * 1_000 });
  } catch (err) {
    const message = (err as Error).message;
    process.stderr.write(`hadis serve: ${message.replace("or start without the gateway (--no-http)", "or stop what holds it")}\n`);
    process.exit(/already in use|not started/.test(message) ? 2 : 1);
  }
  const metrics =
    opts.metricsPort !== undefined ? await startMetricsServer(opts.metricsPort, opts.metricsHost, () => local.gateway.health()) : null;
  process.stderr.write(
    `hadis gateway serving ${local.url} (POST /v1/generate, /v1/jobs; GET /v1/models, /openapi.json, /healthz, /readyz), connected to ${opts.nats}\n`,
  );
  untilSignal(async () => {
    await local.stop(10_000);
    await metrics?.stop();
  });
}
