/**
 * Liveness and readiness of a service process, for orchestrators' probes: `/healthz` answers while
 * the process runs; `/readyz` says whether it can do its work now (its NATS connections are up,
 * a router has a plan to route by, it is not stopping), with each check and why.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { NatsConnection } from "../nats/connection.ts";

/** One check of a readiness answer. */
export interface HealthCheck {
  ok: boolean;
  detail: string;
}

/** A readiness answer: ready when every check passes. */
export interface Health {
  ready: boolean;
  checks: Record<string, HealthCheck>;
}

/** A readiness answer from its checks. */
export function healthOf(checks: Record<string, HealthCheck>): Health {
  return { ready: Object.values(checks).every((c) => c.ok), checks };
}

/** What a process that has not started its services yet answers. */
export const STARTING: Health = healthOf({ services: { ok: false, detail: "starting" } });

/**
 * A connection's part in readiness (`/readyz`): not ready from a disconnect until it reconnects,
 * and for good once closed, saying which server it lost. (The sending side's view of the same
 * connection, with sends held through a drop, is `ConnectionWatch` in services/nats/connection.ts.)
 */
export class ConnectionReadiness {
  private down: string | null = null;

  constructor(
    private readonly nc: NatsConnection,
    /** The connection's name, for the answer. */
    readonly name: string,
  ) {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") this.down = `disconnected from ${s.server}`;
        else if (s.type === "reconnect") this.down = null;
      }
    })().catch(() => undefined);
  }

  /** Null when up; otherwise why not. */
  problem(): string | null {
    const why = this.nc.isClosed() ? "closed" : this.down;
    return why && `${this.name} ${why}`;
  }
}

/**
 * Serves `/healthz` (200 while the process answers) and `/readyz` (200 when ready, 503 when not;
 * a JSON body with each check either way) on a request, if its path is one of them; false
 * otherwise (the caller serves it).
 */
export function serveProbe(req: IncomingMessage, res: ServerResponse, health: () => Health = () => STARTING): boolean {
  const path = req.url?.split("?")[0];
  if (path === "/healthz") {
    res.writeHead(200, { "Content-Type": "text/plain" }).end("ok\n");
    return true;
  }
  if (path !== "/readyz") return false;
  const h = health();
  res.writeHead(h.ready ? 200 : 503, { "Content-Type": "application/json" }).end(`${JSON.stringify(h)}\n`);
  return true;
}
