import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { HadisClient } from "../../services/client/client.ts";
import { connectNats } from "../../services/nats/connection.ts";
import { HadisError } from "../../contracts/errors.ts";
import { JOB_LOST_AFTER_MS, type JobEventRead } from "../../contracts/jobs.ts";
import { JobStream } from "../../services/nats/job-stream.ts";

let t: TestSystem;
beforeAll(async () => {
  // Slow enough models (time scale 0.02: sd3.5-large-turbo 26 ms, sd3.5-medium 260 ms) that a job is seen running.
  t = await startTestSystem({ timeScale: 0.02 });
});
afterAll(async () => {
  await t?.stop();
});

async function all(events: AsyncIterable<JobEventRead>): Promise<JobEventRead[]> {
  const out: JobEventRead[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe("asynchronous jobs over real NATS (hadis.jobs.submit, events kept in JetStream)", () => {
  const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

  it("answers a submission at once with a job id, then reports queued, routed, light done, judged, heavy running and the result", async () => {
    const started = Date.now();
    const accepted = await t.client.submitJob({ prompt: routes.escalated, deadlineMs: 30_000, seed: 3 });
    expect(Date.now() - started).toBeLessThan(300); // the escalated generation alone takes longer
    expect(accepted.events).toBe(`hadis.jobs.${accepted.jobId}.*`);
    const events = await all(t.client.job(accepted.jobId));
    expect(events.map((e) => e.kind)).toEqual(["queued", "routed", "light_done", "judged", "heavy_running", "done"]);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    const done = events.at(-1)!;
    if (done.kind !== "done") throw new Error("no result");
    expect(done.result.route).toBe("light->heavy");
    expect(done.result.seed).toBe(3);
    expect(Buffer.from(done.result.image).subarray(1, 4).toString()).toBe("PNG");
    const judged = events.find((e) => e.kind === "judged");
    expect(judged).toMatchObject({ accept: false, score: done.result.score });
  });

  it("keeps a job's events: a caller on a new connection reads its result after the job ended", async () => {
    const accepted = await t.client.submitJob({ prompt: routes.light, deadlineMs: 30_000 });
    // The submitting connection goes away before the job ends.
    const other = await connectNats(t.server.url, "test-reconnected");
    try {
      const later = new HadisClient(other);
      const events = await all(later.job(accepted.jobId));
      expect(events.at(-1)?.kind).toBe("done");
      // Read again once it has ended, without following: the same events, from the stream.
      const kept = await all(later.job(accepted.jobId, { follow: false }));
      expect(kept.map((e) => e.kind)).toEqual(events.map((e) => e.kind));
      // Resuming after a sequence skips what was seen.
      const resumed = await all(later.job(accepted.jobId, { afterSeq: 2 }));
      expect(resumed.map((e) => e.seq)).toEqual(events.filter((e) => e.seq > 2).map((e) => e.seq));
    } finally {
      await other.close();
    }
  });

  it("refuses a bad submission at once, with no job; a job that fails ends with its typed error", async () => {
    await expect(t.client.submitJob({ prompt: "   " })).rejects.toMatchObject({ code: "invalid_request" });
    await expect(t.client.submitJob({ prompt: "x", steps: 500 })).rejects.toMatchObject({ code: "invalid_request" });
    // Accepted, then out of time: its last event says so.
    const accepted = await t.client.submitJob({ prompt: routes.heavy, deadlineMs: 5 });
    const events = await all(t.client.job(accepted.jobId));
    const last = events.at(-1)!;
    expect(last).toMatchObject({ kind: "failed", error: { code: "deadline_exceeded" } });
  });

  it("an unknown job is refused by name", async () => {
    const err = await all(t.client.job("no-such-job")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HadisError);
    expect((err as HadisError).code).toBe("unknown_job");
  });

  it("a job whose router stopped mid-way ends, past its deadline, with a failed event made by the reader", async () => {
    const stream = await JobStream.open(t.nc, t.system.subjects);
    const now = Date.now();
    await stream.publish(
      { v: 1, jobId: "orphan-1", seq: 1, atMs: now, kind: "queued", deadlineAtMs: now - JOB_LOST_AFTER_MS - 1 },
      "msgpack",
    );
    await stream.publish(
      { v: 1, jobId: "orphan-1", seq: 2, atMs: now, kind: "routed", hard: false, pair: { light: "a", heavy: "b" }, planEpoch: 1 },
      "json",
    );
    const events = await all(t.client.job("orphan-1"));
    expect(events.map((e) => e.kind)).toEqual(["queued", "routed", "failed"]);
    expect(events[2]).toMatchObject({ kind: "failed", seq: 3, error: { code: "deadline_exceeded" } });
  });
});
