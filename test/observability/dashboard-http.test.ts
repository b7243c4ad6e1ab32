/**
 * The dashboard's HTTP surface: GET and HEAD only, security headers on every answer, and on a
 * loopback address only loopback host names (a DNS-rebinding page must not read the plan and
 * traces from the operator's browser).
 */
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { hostAllowed, startDashboard, type RunningDashboard } from "../../services/dashboard/main.ts";
import { useNatsServer } from "../helpers/nats.ts";

const t = useNatsServer("dashboard-http");
let dash: RunningDashboard;
beforeAll(async () => {
  dash = await startDashboard({
    nc: t.nc,
    subjects: buildSubjects(),
    port: 0,
    log: createLogger("dashboard", "error"),
    enableTracing: false,
  });
});
afterAll(async () => {
  await dash?.stop();
});

/** One request with the method and Host header given (fetch cannot set Host). */
function ask(
  method: string,
  path: string,
  host?: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(path, dash.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method, headers: host ? { host } : {} }, (res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the dashboard's HTTP surface", () => {
  it("answers GET and HEAD (without a body), refuses other methods saying which it takes, and sends its security headers", async () => {
    const get = await ask("GET", "/healthz");
    expect([get.status, get.body]).toEqual([200, "ok\n"]);
    expect(get.headers["x-content-type-options"]).toBe("nosniff");
    expect(get.headers["content-security-policy"]).toMatch(/default-src 'self'.*frame-ancestors 'none'/);
    const head = await ask("HEAD", "/healthz");
    expect([head.status, head.body]).toEqual([200, ""]);
    const post = await ask("POST", "/api/state");
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe("GET, HEAD");
    expect((await ask("GET", "/metrics")).headers["cache-control"]).toBe("no-store");
  });

  it("on a loopback address answers loopback names only", async () => {
    const port = new URL(dash.url).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "LOCALHOST"])
      expect((await ask("GET", "/api/state", host)).status).toBe(200);
    const rebound = await ask("GET", "/api/state", `attacker.example:${port}`);
    expect(rebound.status).toBe(421);
    expect(rebound.body).not.toContain("plan");
    // Listening on another address was a choice: any name.
    expect(hostAllowed("dashboard.internal:8787", "0.0.0.0")).toBe(true);
    expect(hostAllowed(undefined, "127.0.0.1")).toBe(false);
  });
});
