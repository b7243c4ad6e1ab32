/**
 * The HTTP gateway: `POST /v1/generate` (JSON, PNG, or Server-Sent Events: a preview, then the final reply), `POST /v1/jobs`, `GET /v1/jobs/<id>` (JSON or Server-Sent
 * Events), `GET /v1/models`, `GET /openapi.json` and the probes, over Node's own `http`. It is a
 * NATS client like any other (`HadisClient` on `hadis.generate` and `hadis.jobs.submit`, the jobs
 * stream, the manager's plan endpoint): no shortcut into the services. Bad input is refused here,
 * before anything is sent; size and concurrency are bounded; the caller's `traceparent` continues.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { HadisError } from "../../contracts/errors.ts";
import { decode, encodeJson } from "../../contracts/envelope.ts";
import { isTerminal, JobIdSchema, type JobEventRead } from "../../contracts/jobs.ts";
import { ManagerPlanReplySchema } from "../../contracts/messages.ts";
import type { ModelsReply } from "../../contracts/public.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import type { ProfileSet } from "../../actors/profile/profile-set.ts";
import { HadisClient, replyWaitMs } from "../client/client.ts";
import { ConnectionReadiness, healthOf, serveProbe, type Health } from "../telemetry/health.ts";
import { readJob } from "../nats/job-stream.ts";
import type { Logger } from "../telemetry/log.ts";
import { listenUrl } from "../telemetry/metrics.ts";
import type { NatsConnection } from "../nats/connection.ts";
import { hostAllowed } from "../dashboard/main.ts";
import { BASE_HEADERS, readJsonBody, sendError, sendJson, sendReply, wantsPng } from "./http.ts";
import { streamGenerate, SSE_HEADERS, wantsEventStream } from "./generate-stream.ts";
import { checkGatewayRequest } from "./intake.ts";
import { openApiDocument } from "./openapi.ts";
import { GatewayTraces } from "./tracing.ts";

/** Port the gateway listens on by default (`npm start` and `hadis serve gateway`). */
export const DEFAULT_HTTP_PORT = 8000;
/** Largest request body read, bytes: a request is well under it (prompts are at most 2,000 characters). */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
/** Generate requests and job submissions waiting on NATS at once; past it: 429 with Retry-After. */
export const DEFAULT_MAX_CONCURRENT = 256;
/** Server-Sent Events streams open at once; past it: 429. */
export const DEFAULT_MAX_STREAMS = 1_024;
/** Interval of the comment lines that keep an idle SSE stream open through proxies, ms. */
const SSE_KEEPALIVE_MS = 15_000;

/** Gateway options. */
export interface GatewayOptions {
  nc: NatsConnection;
  subjects: Subjects;
  /** The model pool `GET /v1/models` lists (with the settings each supports). */
  profiles: ProfileSet;
  log: Logger;
  /** TCP port (0: a free one); default 8000. */
  port?: number;
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
  maxBodyBytes?: number;
  maxConcurrent?: number;
  maxStreams?: number;
  /** Version in the OpenAPI document. */
  version?: string;
}

/** A running gateway. */
export interface RunningGateway {
  /** Base URL, e.g. `http://127.0.0.1:8000/`. */
  url: string;
  /** Readiness: its NATS connection up and not stopping. */
  health(): Health;
  /** Stops taking requests, lets those in flight finish within `graceMs`, then closes every connection. */
  stop(graceMs?: number): Promise<void>;
}

/** Starts the gateway; rejects (EADDRINUSE, …) when it cannot listen. */
export async function startGateway(opts: GatewayOptions): Promise<RunningGateway> {
  const { nc, subjects, log } = opts;
  const host = opts.host ?? "127.0.0.1";
  const maxBody = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const maxConcurrent = opts.maxConcurrent ?? DEFAULT_MAX_CONCURRENT;
  const maxStreams = opts.maxStreams ?? DEFAULT_MAX_STREAMS;
  const client = new HadisClient(nc, subjects.prefix);
  const connection = new ConnectionReadiness(nc, "hadis-gateway");
  const traces = new GatewayTraces(nc);
  const openapi = JSON.stringify(openApiDocument(opts.version ?? "0.1.0"));
  const inFlight = new Set<Promise<unknown>>();
  const streams = new Set<AbortController>();
  let active = 0;
  let stopping = false;

  /** Runs a NATS-bound route within the concurrency limit. */
  async function limited(run: () => Promise<void>): Promise<void> {
    if (active >= maxConcurrent)
      throw new HadisError("too_many_requests", `the gateway has ${active} requests in flight, its limit: retry shortly`, {
        retryAfterMs: 1_000,
      });
    active++;
    try {
      await run();
    } finally {
      active--;
    }
  }

  async function generate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const checked = checkGatewayRequest(await readJsonBody(req, maxBody));
    if (wantsEventStream(req.headers.accept)) {
      await limited(() =>
        traces.around(req, res, "POST /v1/generate", (headers) =>
          streamGenerate(client, res, checked, { ...(headers ? { headers } : {}), keepaliveMs: SSE_KEEPALIVE_MS }),
        ),
      );
      return;
    }
    // One answer only: a preview would have no one to read it, so none is asked (the final reply is the answer).
    const { preview: _unread, ...request } = checked;
    const png = wantsPng(req.headers.accept);
    await limited(() =>
      traces.around(req, res, "POST /v1/generate", async (headers) => {
        const reply = await client.generate(request, { timeoutMs: replyWaitMs(request), ...(headers ? { headers } : {}) });
        sendReply(res, reply, png);
      }),
    );
  }

  async function submitJob(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const request = checkGatewayRequest(await readJsonBody(req, maxBody));
    await limited(() =>
      traces.around(req, res, "POST /v1/jobs", async (headers) => {
        const accepted = await client.submitJob(request, headers ? { headers } : {});
        sendJson(res, 202, accepted, { Location: `/v1/jobs/${accepted.jobId}` });
      }),
    );
  }

  async function job(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const parsed = JobIdSchema.safeParse(id);
    if (!parsed.success) throw new HadisError("invalid_request", `"${id}" is not a job id`, { field: "jobId" });
    if (!(req.headers.accept ?? "").includes("text/event-stream")) {
      const events: JobEventRead[] = [];
      for await (const e of readJob(nc, subjects, id, { follow: false })) events.push(e);
      const status = events.at(-1)?.kind ?? "queued";
      sendJson(res, 200, { jobId: id, status, ended: isTerminal(status), events });
      return;
    }
    if (streams.size >= maxStreams)
      throw new HadisError("too_many_requests", `the gateway has ${streams.size} event streams open, its limit: retry shortly`, {
        retryAfterMs: 5_000,
      });
    const abort = new AbortController();
    streams.add(abort);
    res.on("close", () => abort.abort());
    const lastId = Number(req.headers["last-event-id"]);
    const events = readJob(nc, subjects, id, {
      follow: true,
      signal: abort.signal,
      ...(Number.isInteger(lastId) && lastId > 0 ? { afterSeq: lastId } : {}),
    });
    let keepalive: NodeJS.Timeout | undefined;
    try {
      // The first read refuses an unknown job: an error answer, before the stream starts.
      let next = await events.next();
      res.writeHead(200, SSE_HEADERS);
      res.write(`: job ${id}\n\n`);
      keepalive = setInterval(() => res.write(": keep-alive\n\n"), SSE_KEEPALIVE_MS);
      for (; !next.done; next = await events.next()) {
        const e = next.value;
        res.write(`id: ${e.seq}\nevent: ${e.kind}\ndata: ${Buffer.from(encodeJson(e)).toString("utf8")}\n\n`);
      }
      res.end();
    } finally {
      clearInterval(keepalive);
      streams.delete(abort);
      await events.return(undefined).catch(() => undefined);
    }
  }

  async function models(res: ServerResponse): Promise<void> {
    const answer = await nc.request(subjects.managerPlan, new Uint8Array(), { timeout: 2_000 }).then(
      (msg) => decode(ManagerPlanReplySchema, msg.data, "manager plan"),
      (err: unknown) => {
        throw new HadisError("no_capacity", `no resource manager answered on ${subjects.managerPlan} (${(err as Error).message})`, {
          retryAfterMs: 1_000,
        });
      },
    );
    const plan = answer.plan;
    const body: ModelsReply = {
      models: opts.profiles.pool.models.map((name) => {
        const profile = opts.profiles.byName.get(name)!;
        const light = plan?.pair.light === name;
        const heavy = plan?.pair.heavy === name;
        const allocation = plan?.models[name];
        return {
          name,
          ...(profile.displayName ? { displayName: profile.displayName } : {}),
          ...(profile.options ? { options: profile.options } : {}),
          role: light && heavy ? "both" : light ? "light" : heavy ? "heavy" : null,
          workers: allocation?.workers ?? 0,
          ...(allocation ? { batchSize: allocation.batchSize } : {}),
        };
      }),
      plan,
      demandQps: answer.demandQps,
    };
    sendJson(res, 200, body);
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    const method = req.method ?? "GET";
    if (!hostAllowed(req.headers.host, host))
      throw new HadisError(
        "invalid_request",
        `this gateway listens on ${host} and answers only to that name, not "${req.headers.host ?? ""}"`,
        { field: "Host" },
      );
    // A web page of another origin must not spend GPU time through a browser that can reach the gateway.
    const origin = req.headers.origin;
    if (origin && origin !== "null" && hostOf(origin) !== req.headers.host)
      throw new HadisError("invalid_request", `cross-origin requests are not served (Origin ${origin})`, { field: "Origin" });
    if (stopping) throw new HadisError("overloaded", "the gateway is stopping", { retryAfterMs: 1_000 });
    const jobId = path.startsWith("/v1/jobs/") ? path.slice("/v1/jobs/".length) : null;
    const handler = jobId !== null ? routes["/v1/jobs/{jobId}"] : routes[path];
    if (!handler) throw new HadisError("not_found", `no route ${method} ${path}: see /openapi.json`);
    if (method !== handler.method) throw new HadisError("method_not_allowed", `${method} ${path}: use ${handler.method}`);
    await handler.run(req, res, jobId === null ? "" : safeDecode(jobId));
  }

  /** The routes, by path. */
  const routes: Record<string, { method: string; run(req: IncomingMessage, res: ServerResponse, jobId: string): Promise<void> }> = {
    "/v1/generate": { method: "POST", run: generate },
    "/v1/jobs": { method: "POST", run: submitJob },
    "/v1/jobs/{jobId}": { method: "GET", run: (req, res, id) => job(req, res, id) },
    "/v1/models": { method: "GET", run: (_req, res) => models(res) },
    "/openapi.json": {
      method: "GET",
      run: async (_req, res) => void res.writeHead(200, { ...BASE_HEADERS, "Content-Type": "application/json" }).end(openapi),
    },
  };

  const health = (): Health =>
    healthOf({
      nats: connection.problem() === null ? { ok: true, detail: "connected" } : { ok: false, detail: connection.problem()! },
      stopping: { ok: !stopping, detail: stopping ? "stopping" : "no" },
    });

  const server: Server = createServer((req, res) => {
    if (serveProbe(req, res, health)) return;
    const p = route(req, res)
      .catch((err: unknown) => sendError(res, err))
      .catch((err: unknown) => log.warn("gateway.answer_failed", { error: (err as Error).message }))
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? DEFAULT_HTTP_PORT, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = listenUrl(host, port, "/");
  log.info("gateway.started", { url });
  return {
    url,
    health,
    async stop(graceMs = 10_000) {
      stopping = true;
      server.close();
      for (const s of streams) s.abort();
      const settled = Promise.allSettled([...inFlight]);
      await Promise.race([settled, new Promise((r) => setTimeout(r, graceMs).unref())]);
      server.closeAllConnections();
      await traces.close();
      log.info("gateway.stopped", { url });
    },
  };
}

/** A path segment decoded (one with a malformed escape is taken as written: the job id check refuses it by name). */
function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** The host (and port) an `Origin` names; null for one that is not a URL. */
function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}
