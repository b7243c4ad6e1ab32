/**
 * Jobs over the HTTP gateway against a real nats-server: submitted with POST /v1/jobs, followed to
 * their result over Server-Sent Events, resumed after a dropped stream, and read again as JSON
 * after the caller went away.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { readSse } from "../helpers/http.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { startGateway, type RunningGateway } from "../../services/gateway/main.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { loadProfiles } from "../../services/files/profiles.ts";
import { createLogger } from "../../services/telemetry/log.ts";

let t: TestSystem;
let nc: NatsConnection;
let gateway: RunningGateway;
let base: string;

beforeAll(async () => {
  // Slow enough that a job is followed while it runs (sd3.5-medium's heavy image: 260 ms).
  t = await startTestSystem({ timeScale: 0.02 });
  nc = await connectNats(t.server.url, "hadis-gateway");
  gateway = await startGateway({ nc, subjects: t.system.subjects, profiles: loadProfiles(), log: createLogger("test", "error"), port: 0 });
  base = gateway.url.replace(/\/$/, "");
  // Node loads its fetch on first use (about a second here): not the gateway's time.
  await fetch(`${base}/healthz`);
});
afterAll(async () => {
  await gateway?.stop(1_000);
  await nc?.close();
  await t?.stop();
});

const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

async function submit(body: object): Promise<{ jobId: string; location: string }> {
  const res = await fetch(`${base}/v1/jobs`, { method: "POST", body: JSON.stringify(body) });
  expect(res.status).toBe(202);
  const accepted = (await res.json()) as { jobId: string };
  return { jobId: accepted.jobId, location: res.headers.get("location")! };
}

describe("jobs over HTTP", () => {
  it("follows a job to its result over Server-Sent Events", async () => {
    const started = Date.now();
    const { jobId, location } = await submit({ prompt: routes.escalated, deadlineMs: 30_000 });
    // Accepted before it ran: the submit took less than the generation (a bound that holds on a loaded machine too).
    const submitMs = Date.now() - started;
    expect(location).toBe(`/v1/jobs/${jobId}`);
    const res = await fetch(`${base}${location}`, { headers: { accept: "text/event-stream" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const events = await readSse(res.body!);
    expect(events.map((e) => e.event)).toEqual(["queued", "routed", "light_done", "judged", "heavy_running", "done"]);
    expect(events.map((e) => e.id)).toEqual(["1", "2", "3", "4", "5", "6"]);
    const done = JSON.parse(events.at(-1)!.data) as {
      kind: string;
      result: { route: string; image: string; timings: { totalMs: number } };
    };
    expect(done.result.route).toBe("light->heavy");
    expect(submitMs).toBeLessThan(done.result.timings.totalMs);
    expect(typeof done.result.image).toBe("string"); // base64, as in a JSON reply
    expect(Buffer.from(done.result.image, "base64").subarray(1, 4).toString()).toBe("PNG");
  });

  it("a caller whose stream dropped resumes with Last-Event-ID, and one that went away reads the result as JSON", async () => {
    const { jobId } = await submit({ prompt: routes.escalated, deadlineMs: 30_000 });
    // The first stream is dropped after two events.
    const first = await fetch(`${base}/v1/jobs/${jobId}`, { headers: { accept: "text/event-stream" } });
    const seen = await readSse(first.body!, 2);
    expect(seen.map((e) => e.id)).toEqual(["1", "2"]);
    const rest = await readSse(
      (await fetch(`${base}/v1/jobs/${jobId}`, { headers: { accept: "text/event-stream", "last-event-id": "2" } })).body!,
    );
    expect(rest[0].id).toBe("3");
    expect(rest.at(-1)!.event).toBe("done");
    // Later, without a stream: the whole job as JSON, from the jobs stream.
    const status = (await (await fetch(`${base}/v1/jobs/${jobId}`)).json()) as {
      status: string;
      ended: boolean;
      events: { kind: string; seq: number; result?: { image: unknown } }[];
    };
    expect(status).toMatchObject({ status: "done", ended: true });
    expect(typeof status.events.at(-1)!.result!.image).toBe("string");
    expect(status.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("a job still running reads as its progress so far", async () => {
    const { jobId } = await submit({ prompt: routes.heavy, deadlineMs: 30_000, quality: "best" });
    const status = (await (await fetch(`${base}/v1/jobs/${jobId}`)).json()) as { status: string; ended: boolean };
    expect(status.ended).toBe(false);
    expect(["queued", "routed", "heavy_running"]).toContain(status.status);
  });

  it("refuses a bad submission with its typed error and no job; refuses a malformed job id", async () => {
    const res = await fetch(`${base}/v1/jobs`, { method: "POST", body: JSON.stringify({ prompt: "x", width: 10 }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { details: { field: string } } }).error.details.field).toBe("height");
    expect((await fetch(`${base}/v1/jobs/a.b`)).status).toBe(400);
    const unknown = await fetch(`${base}/v1/jobs/nope`, { headers: { accept: "text/event-stream" } });
    expect(unknown.status).toBe(404);
  });
});
