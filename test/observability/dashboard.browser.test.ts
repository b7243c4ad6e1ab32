import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { waitFor } from "../helpers/processes.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { startDashboard, type RunningDashboard } from "../../services/dashboard/main.ts";
import { shutdownTelemetry, spanSinkSubject } from "../../services/telemetry/tracing.ts";
import { encode } from "../../contracts/envelope.ts";
import { fingerprintOf, keyedRequestId } from "../../actors/request/idempotent.ts";

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-quic",
  "--no-first-run",
  "--disable-component-update",
  "--disable-sync",
];

let t: TestSystem;
let dashNc: NatsConnection;
let dashboard: RunningDashboard;
let browser: Browser | undefined;

beforeAll(async () => {
  // The discriminator's judge span, a service of its own in the waterfall.
  t = await startTestSystem({ policy: "static", judgeOnWorker: false });
  dashNc = await connectNats(t.server.url, "hadis-dashboard");
  dashboard = await startDashboard({ nc: dashNc, subjects: t.system.subjects, port: 0, log: createLogger("dashboard", "error") });
});
afterAll(async () => {
  await browser?.close();
  await dashboard?.stop();
  await dashNc?.close();
  await t?.stop();
  await shutdownTelemetry();
});

/** The page's document, as the predicates below read it (the project's types have no DOM). */
type PageDocument = { querySelector(s: string): { textContent: string | null } | null; querySelectorAll(s: string): { length: number } };
/**
 * Predicates run in the page as functions, each whole (serialized: no closure): a string predicate
 * is evaluated with `eval`, which the dashboard's Content-Security-Policy (scripts from itself only) refuses.
 */
const workersShown = (n: number) => (globalThis as unknown as { document: PageDocument }).document.querySelectorAll(".worker").length === n;
const traceShown = ([id, rows]: [string, number]) => {
  const doc = (globalThis as unknown as { document: PageDocument }).document;
  return doc.querySelector("#trace .tid")?.textContent === id && doc.querySelectorAll("#trace .wfrow").length >= rows;
};

describe("the live dashboard", () => {
  const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

  it("shows the plan, the workers and request waterfalls; a click shows the whole trace", async () => {
    // Traffic: every route, plus a burst.
    await Promise.all([routes.light, routes.heavy, routes.escalated].map((prompt) => t.client.generate({ prompt, deadlineMs: 20_000 })));
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => t.client.generate({ prompt: `a watercolor of lighthouse ${i}`, deadlineMs: 20_000 })),
    );
    const escalated = await t.client.generate({ prompt: routes.escalated, deadlineMs: 20_000 });
    await waitFor(
      () => dashboard.state.recent(100).some((r) => r.requestId === escalated.requestId && r.stages.length >= 8),
      10_000,
      "the escalated request's spans",
    );

    // The JSON the page reads (worker heartbeats arrive once a second).
    await waitFor(
      async () => ((await (await fetch(`${dashboard.url}api/state`)).json()) as { workers: unknown[] }).workers.length === 4,
      10_000,
      "four workers",
    );
    const state = (await (await fetch(`${dashboard.url}api/state`)).json()) as {
      plan: { pair: unknown };
      workers: unknown[];
      recent: { requestId?: string; traceId: string }[];
    };
    expect(state.plan.pair).toEqual({ light: DEFAULT_STATIC.light, heavy: DEFAULT_STATIC.heavy });
    expect(state.workers).toHaveLength(4);
    expect(state.recent.length).toBeGreaterThanOrEqual(10);
    const metrics = await (await fetch(`${dashboard.url}metrics`)).text();
    expect(metrics).toMatch(/^hadis_requests_total\{route="light->heavy",outcome="ok"\} \d+/m);

    browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
    const page = await browser.newPage({ viewport: { width: 1440, height: 1300 } });
    await page.goto(dashboard.url);
    await page.waitForSelector(".plan .pair");
    expect(await page.textContent(".plan .pair")).toContain(DEFAULT_STATIC.heavy);
    await page.waitForFunction(workersShown, 4);
    expect(await page.locator(".worker .badge.serving").count()).toBe(4);
    await page.waitForSelector("#requests tbody tr[data-trace] .mini span");

    // Click the escalated request: its trace spans three services.
    const traceId =
      state.recent.find((r) => r.requestId === escalated.requestId)?.traceId ??
      dashboard.state.recent(100).find((r) => r.requestId === escalated.requestId)!.traceId;
    await page.click(`#requests tbody tr[data-trace="${traceId}"]`);
    await page.waitForFunction(traceShown, [traceId, 8] as [string, number]);
    const names = await page.locator("#trace .wfrow .name").allTextContents();
    expect(names.some((n) => n.startsWith("hadis.generate"))).toBe(true);
    expect(names.some((n) => n.startsWith(`execute ${DEFAULT_STATIC.heavy}`))).toBe(true);
    expect(await page.textContent("#trace h2")).toMatch(/router.*worker.*discriminator|discriminator/);
    expect(await page.locator("#requests tbody tr.selected").count()).toBe(1);
    // Each execute bar has the colour of the stage it served (inherited from the router's stage span).
    expect(await page.locator(`#trace .wfrow:has-text("execute ${DEFAULT_STATIC.heavy}") .bar.st-heavy`).count()).toBe(1);
    expect(await page.locator(`#trace .wfrow:has-text("execute ${DEFAULT_STATIC.light}") .bar.st-light`).count()).toBe(1);
    await page.click("#trace .wfrow:has-text('judge')");
    await page.waitForSelector("#trace .attrs :text('hadis.disc.score')");

    mkdirSync("test-artifacts", { recursive: true });
    await page.waitForTimeout(1_200);
    // The page polled meanwhile (and re-read the trace): the clicked span is still the one shown.
    expect(await page.textContent("#trace .wfrow.sel .name")).toContain("judge");
    expect(await page.locator("#requests tbody tr.selected").count()).toBe(1);
    await page.screenshot({ path: "test-artifacts/dashboard.png", fullPage: true });
    // The click put the request in the address; the reply's request id opens its trace, in the API and the page.
    expect(new URL(page.url()).hash).toBe(`#request=${escalated.requestId}`);
    const byRequest = (await (await fetch(`${dashboard.url}api/trace/${escalated.requestId}`)).json()) as {
      traceId: string;
      requestId: string;
      rootSpanId: string;
      spans: unknown[];
    };
    expect(byRequest).toMatchObject({ traceId, requestId: escalated.requestId });
    expect(byRequest.spans.length).toBeGreaterThanOrEqual(8);
    expect((await fetch(`${dashboard.url}api/trace/no-such-request`)).status).toBe(404);
    // A later request, so that the page left to itself would show that one.
    const later = await t.client.generate({ prompt: "a quiet harbour at dawn", deadlineMs: 20_000 });
    await waitFor(() => dashboard.state.recent(1)[0]?.requestId === later.requestId, 10_000, "the later request listed first");
    const linked = await browser.newPage({ viewport: { width: 1440, height: 1300 } });
    await linked.goto(`${dashboard.url}#request=${escalated.requestId}`);
    await linked.waitForFunction(traceShown, [traceId, 8] as [string, number]);
    await linked.waitForTimeout(1_200); // a poll later, still that request (not the latest one)
    expect(await linked.textContent("#trace .tid")).toBe(traceId);
    expect(await linked.getAttribute("#requests tbody tr.selected", "data-request")).toBe(escalated.requestId);
    await linked.close();
    // A link opened before its request is listed (a reply comes before its spans): shown once it is.
    const key = `browser-${Date.now()}`;
    const ahead = keyedRequestId(key, fingerprintOf("a lantern in the fog", undefined));
    const early = await browser.newPage({ viewport: { width: 1440, height: 1300 } });
    await early.goto(`${dashboard.url}#request=${ahead}`);
    await early.waitForSelector("#trace .empty");
    const keyed = await t.client.generate({ prompt: "a lantern in the fog", idempotencyKey: key, deadlineMs: 20_000 });
    expect(keyed.requestId).toBe(ahead);
    await early.waitForSelector(`#requests tbody tr.selected[data-request="${ahead}"]`, { timeout: 10_000 });
    const keyedTrace = dashboard.state.request(ahead)!.traceId;
    expect(await early.textContent("#trace .tid")).toBe(keyedTrace);
    await early.close();
  }, 60_000);

  it("shows what anybody publishes on the span feed as text: markup in a service name, a request id, a model or a fallback runs nothing; the fallback shows in the row and the trace", async () => {
    const traceId = "ab".repeat(16);
    const attack = (n: number) => `<img src=x onerror="window.__xss=${n}">`;
    t.nc.publish(
      spanSinkSubject(t.system.subjects.prefix),
      encode([
        {
          t: traceId,
          s: "cd".repeat(8),
          n: "hadis.generate",
          sv: attack(1),
          k: 1,
          st: Date.now(),
          d: 5,
          a: {
            "hadis.request_id": attack(2),
            "hadis.route": attack(3),
            "hadis.outcome": "ok",
            "hadis.models": [attack(4)],
            [attack(5)]: attack(6),
            "hadis.fallback": attack(7),
          },
        },
      ]),
    );
    await waitFor(() => dashboard.state.recent(300).some((r) => r.traceId === traceId), 10_000, "the published span");
    const response = await fetch(dashboard.url);
    expect(response.headers.get("content-security-policy")).toContain("default-src 'self'");
    const page = await browser!.newPage();
    await page.goto(dashboard.url);
    await page.waitForSelector(`#requests tbody tr[data-trace="${traceId}"]`);
    await page.click(`#requests tbody tr[data-trace="${traceId}"]`);
    await page.waitForFunction(traceShown, [traceId, 0] as [string, number]);
    await page.waitForTimeout(300);
    // (The security policy alone blocks inline handlers such as the attack's onerror: the next
    // lines check the escaping, this one the two together.)
    expect(await page.evaluate("window.__xss")).toBeUndefined();
    expect(await page.locator("#trace img, #requests img").count()).toBe(0);
    expect(await page.textContent("#trace h2")).toContain(attack(1));
    expect(await page.textContent("#trace .attrs")).toContain(attack(6));
    // The reply's fallback shows in the request's row and in the trace's header.
    expect(await page.textContent(`#requests tbody tr[data-trace="${traceId}"] .fallback`)).toBe(`(${attack(7)})`);
    expect(await page.textContent("#trace .head")).toContain(`fallback ${attack(7)}`);
    await page.screenshot({ path: "test-artifacts/dashboard-fallback.png", fullPage: true });
    await page.close();
  }, 30_000);
});
