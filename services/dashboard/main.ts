/**
 * The live dashboard of a HADIS system (`http://127.0.0.1:8787` under `hadis start`): one static
 * page, JSON endpoints and the aggregated Prometheus `/metrics` of this process. It listens to the
 * services' finished spans (`hadis.telemetry.spans`), router load reports, worker heartbeats and
 * the plan, and turns on tracing with the local span sink in this process if nothing configured it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { readFileSync } from "node:fs";
import { decodeFromSender, parseRaw } from "../../contracts/envelope.ts";
import { RouterStatsSchema, WorkerHeartbeatSchema } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import type { Logger } from "../telemetry/log.ts";
import type { NatsConnection, Subscription } from "../nats/connection.ts";
import { PlanView } from "../nats/plan-view.ts";
import { serveProbe, type Health } from "../telemetry/health.ts";
import { listenUrl, METRICS_CONTENT_TYPE, metricsText, recordPlan } from "../telemetry/metrics.ts";
import { configureTelemetry, spanSinkSubject, tracingEnabled, tracingOptedOut } from "../telemetry/tracing.ts";
import { DashboardState } from "./state.ts";
import { packagePath } from "../files/package-root.ts";

/** Default port of the dashboard. */
export const DEFAULT_DASHBOARD_PORT = 8787;

/** Dashboard options. */
export interface DashboardOptions {
  nc: NatsConnection;
  subjects: Subjects;
  /** TCP port (0 picks a free one); default 8787. */
  port?: number;
  host?: string;
  log: Logger;
  /** Turn tracing on in this process (with the span sink) when nothing configured it; default true. */
  enableTracing?: boolean;
  /** What `/readyz` answers: the readiness of the services this process runs ("starting" until given). */
  health?: () => Health;
}

/** A running dashboard. */
export interface RunningDashboard {
  /** Base URL, e.g. `http://127.0.0.1:8787/`. */
  url: string;
  readonly state: DashboardState;
  stop(): Promise<void>;
}

// The page is static and plain JavaScript: read from the package, compiled or not.
const PUBLIC = `${packagePath("services", "dashboard", "public")}/`;
const STATIC: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
};

/** On every answer: no sniffing, no framing, scripts and data from the dashboard itself only (its bars are styled inline). */
const SECURITY_HEADERS = {
  "X-Content-Type-Options": "nosniff",
  "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  "Referrer-Policy": "no-referrer",
};

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

/**
 * Whether a request's `Host` may be answered. A dashboard on a loopback address answers only to a
 * loopback name: a web page whose name an attacker points at 127.0.0.1 (DNS rebinding) would
 * otherwise read the plan and the traces from the operator's browser. One listening on another
 * address was exposed on purpose and answers to any name.
 */
export function hostAllowed(hostHeader: string | undefined, listenHost: string): boolean {
  if (!LOOPBACK.has(listenHost)) return true;
  if (!hostHeader) return false;
  const name = hostHeader.startsWith("[") ? hostHeader.slice(0, hostHeader.indexOf("]") + 1) : hostHeader.split(":")[0];
  return LOOPBACK.has(name.toLowerCase());
}

function sendJson(res: ServerResponse, body: unknown, status = 200): void {
  res.writeHead(status, { "Content-Type": "application/json", "Cache-Control": "no-store" }).end(JSON.stringify(body));
}

/** Starts the dashboard. */
export async function startDashboard(opts: DashboardOptions): Promise<RunningDashboard> {
  const { nc, subjects, log } = opts;
  // The dashboard's waterfalls need the services' spans: tracing on, unless the environment says
  // off (then the dashboard shows no traces; an OTLP endpoint set as well exports nothing). The
  // span feed follows `HADIS_SPAN_SINK` (default on).
  if ((opts.enableTracing ?? true) && !tracingEnabled() && !tracingOptedOut())
    configureTelemetry({ enabled: true, subjectPrefix: subjects.prefix });
  const state = new DashboardState();
  const { view: plans } = await PlanView.open(nc, subjects, log);
  plans.onPlan((plan) => {
    state.plan = plan;
    recordPlan(plan);
  });
  const subs: Subscription[] = [
    nc.subscribe(spanSinkSubject(subjects.prefix), {
      callback: (_e, m) => {
        let batch: unknown;
        try {
          batch = parseRaw(m.data);
        } catch {
          batch = undefined; // not msgpack: counted as malformed below
        }
        try {
          state.addSpans(batch);
        } catch (err) {
          log.warn("dashboard.spans_failed", { error: (err as Error).message }); // never stops the dashboard
        }
      },
    }),
    nc.subscribe(subjects.routerStatsAll, {
      callback: (_e, m) => {
        try {
          state.addRouterStats(
            decodeFromSender(RouterStatsSchema, m, "router stats", (r) => r.routerId),
            Date.now(),
          );
        } catch {
          /* ignored: not ours to judge */
        }
      },
    }),
    nc.subscribe(subjects.workerHeartbeatAll, {
      callback: (_e, m) => {
        try {
          // (One naming another worker than its subject is not listed: the manager refuses and counts it.)
          state.addHeartbeat(
            decodeFromSender(WorkerHeartbeatSchema, m, "heartbeat", (b) => b.workerId),
            Date.now(),
          );
        } catch {
          /* ignored: the manager counts what it refuses */
        }
      },
    }),
  ];

  const files = new Map<string, Buffer>();
  const staticFile = (name: string) => {
    // Read once in production; a change on disk shows on restart.
    let body = files.get(name);
    if (!body) files.set(name, (body = readFileSync(PUBLIC + name)));
    return body;
  };

  const host = opts.host ?? "127.0.0.1";
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://dashboard");
    const path = url.pathname;
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    if (req.method !== "GET" && req.method !== "HEAD") return void res.writeHead(405, { Allow: "GET, HEAD" }).end();
    if (!hostAllowed(req.headers.host, host))
      return void res.writeHead(421, { "Content-Type": "text/plain" }).end("this dashboard answers only to the host it listens on\n");
    if (STATIC[path]) {
      res.writeHead(200, { "Content-Type": STATIC[path].type, "Cache-Control": "no-store" }).end(staticFile(STATIC[path].file));
      return;
    }
    if (path === "/metrics") {
      res.writeHead(200, { "Content-Type": METRICS_CONTENT_TYPE, "Cache-Control": "no-store" }).end(await metricsText());
      return;
    }
    if (path === "/api/state") {
      const now = Date.now();
      sendJson(res, {
        now,
        plan: state.plan,
        workers: state.liveWorkers(now),
        series: state.series(now, Number(url.searchParams.get("seconds") ?? 300)),
        summary: state.summary(now),
        recent: state.recent(Number(url.searchParams.get("recent") ?? 40)),
        tracing: tracingEnabled(),
      });
      return;
    }
    // A trace id, or the request id a reply carries (of a request still listed: the latest 300).
    const trace = /^\/api\/trace\/([A-Za-z0-9_.:-]{1,128})$/.exec(path);
    if (trace) {
      let spans = state.trace(trace[1]);
      const request = spans.length > 0 ? undefined : state.request(trace[1]);
      if (request) spans = state.trace(request.traceId);
      const traceId = request?.traceId ?? trace[1];
      const found = request ? { traceId, requestId: trace[1], rootSpanId: request.spanId, spans } : { traceId, spans };
      sendJson(res, spans.length ? found : { error: "unknown trace or request" }, spans.length ? 200 : 404);
      return;
    }
    if (serveProbe(req, res, opts.health)) return;
    res.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      log.warn("dashboard.error", { error: (err as Error).message });
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? DEFAULT_DASHBOARD_PORT, host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : (opts.port ?? DEFAULT_DASHBOARD_PORT);
  const url = listenUrl(host, port, "/");
  log.info("dashboard.started", { url });
  return {
    url,
    state,
    async stop() {
      subs.forEach((s) => s.unsubscribe());
      plans.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      log.info("dashboard.stopped", {});
    },
  };
}
