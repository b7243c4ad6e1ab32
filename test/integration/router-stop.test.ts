/**
 * A router stopped while requests still run (past its grace) answers each with a typed error:
 * none is left to its caller's timeout.
 */
import { afterAll, describe, expect, it } from "vitest";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import { HadisError } from "../../contracts/errors.ts";
import { startTestServices } from "../helpers/system.ts";
import { waitFor } from "../helpers/processes.ts";

let server: LocalServer | undefined;
let nc: NatsConnection | undefined;
afterAll(async () => {
  await nc?.close();
  await server?.stop();
});

describe("stopping a router with requests in flight", () => {
  it("answers each, once the grace is over, with a typed error to retry", async () => {
    server = await startNatsServer();
    const system = await startTestServices(server.url, { workers: 2 });
    nc = await connectNats(server.url, "test-client");
    // No worker pulls: the requests wait, far from their deadline, when the stop comes.
    await Promise.all(system.workers!.agents.map((a) => a.stop()));
    const client = new HadisClient(nc);
    const started = Date.now();
    const pending = Array.from({ length: 3 }, (_, i) =>
      client.generate({ prompt: `a harbour at night ${i}`, deadlineMs: 30_000 }, { timeoutMs: 10_000 }).catch((e: unknown) => e),
    );
    // A keyed request and its retry, waiting on it: when the stop abandons the first, the retry
    // must not start new work whose result nobody would listen for.
    const keyed = { prompt: "a lighthouse in fog", idempotencyKey: `stop-${Date.now()}`, deadlineMs: 30_000 };
    pending.push(client.generate(keyed, { timeoutMs: 10_000 }).catch((e: unknown) => e));
    await new Promise((r) => setTimeout(r, 100));
    pending.push(client.generate(keyed, { timeoutMs: 10_000 }).catch((e: unknown) => e));
    // All five reached the router before it stops (the retry must be waiting, not refused at the door).
    await waitFor(() => system.routers[0].stats().received >= 5, 5_000, "five requests received");
    await system.stop(300);
    const answers = await Promise.all(pending);
    expect(answers.map((a) => (a as HadisError).code)).toEqual(Array(5).fill("overloaded"));
    expect(answers.every((a) => a instanceof HadisError && a.retryable && a.details.retryAfterMs === 100)).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000); // answered, not timed out
  }, 30_000);
});
