/** The client's wait for a serving system, against a real nats-server and a stand-in router. */
import { afterEach, describe, expect, it } from "vitest";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { replyError } from "../../services/nats/replies.ts";
import { startProxy, type Proxy } from "../helpers/proxy.ts";
import { waitFor } from "../helpers/processes.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { HadisClient } from "../../services/client/client.ts";
import { HadisError, type ErrorCode } from "../../contracts/errors.ts";

const t = useNatsServer("test-client-wait");

/** A stand-in router that answers every request with `code`; `asked()` counts the requests. */
async function refusing(code: ErrorCode) {
  let asked = 0;
  const sub = t.nc.subscribe("hadis.generate", {
    callback: (_e, m) => void (asked++, replyError(m, new HadisError(code, `stand-in says ${code}`), "msgpack")),
  });
  await t.nc.flush();
  return { unsubscribe: () => sub.unsubscribe(), asked: () => asked };
}

describe("HadisClient.waitUntilServing", () => {
  it("stops at once on an answer waiting cannot change, with its code", async () => {
    const sub = await refusing("invalid_request");
    const started = performance.now();
    const err = await new HadisClient(t.nc).waitUntilServing(5_000, 1_000).catch((e: unknown) => e);
    sub.unsubscribe();
    expect(err).toBeInstanceOf(HadisError);
    expect((err as HadisError).code).toBe("invalid_request");
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it("retries a retryable answer until its time is up, then throws it with its code", async () => {
    const sub = await refusing("overloaded");
    const started = performance.now();
    const err = await new HadisClient(t.nc).waitUntilServing(800, 500).catch((e: unknown) => e);
    sub.unsubscribe();
    expect((err as HadisError).code).toBe("overloaded");
    expect((err as Error).message).toMatch(/not serving after 800 ms/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(800);
    expect(sub.asked()).toBeGreaterThanOrEqual(3); // asked again every 200 ms, not once and then waited out
  });

  it("asks once for an answer waiting cannot change", async () => {
    const sub = await refusing("invalid_request");
    await new HadisClient(t.nc).waitUntilServing(2_000, 500).catch(() => undefined);
    sub.unsubscribe();
    expect(sub.asked()).toBe(1);
  });
});

/**
 * Connections cut under the client, through TCP proxies: nats.js drops what is published while a
 * connection is down (its buffer is reset on each reconnect), and core NATS is at most once.
 */
describe("HadisClient across a dropped connection", () => {
  const proxies: Proxy[] = [];
  const conns: NatsConnection[] = [];
  const subs: { unsubscribe(): void }[] = [];
  afterEach(async () => {
    for (const sub of subs.splice(0)) sub.unsubscribe();
    for (const c of conns.splice(0)) await c.close().catch(() => undefined);
    for (const p of proxies.splice(0)) await p.close();
  });
  async function through(name: string): Promise<{ proxy: Proxy; nc: NatsConnection }> {
    const proxy = await startProxy(t.server.port);
    const nc = await connectNats(proxy.url, name);
    proxies.push(proxy);
    conns.push(nc);
    return { proxy, nc };
  }
  /** A stand-in router on `nc` that answers `overloaded` after `delayMs`. */
  async function slowRouter(nc: NatsConnection, delayMs: number) {
    let asked = 0;
    subs.push(
      nc.subscribe("hadis.generate", {
        callback: (_e, m) => void (asked++, setTimeout(() => replyError(m, new HadisError("overloaded", "stand-in"), "msgpack"), delayMs)),
      }),
    );
    await nc.flush();
    return { asked: () => asked };
  }

  it("sends a request made while disconnected once reconnected, and asks again while the routers reconnect too", async () => {
    const client = await through("client");
    const router = await through("router");
    const stand = await slowRouter(router.nc, 0);
    // Both connections drop; the client's comes back first (no router is subscribed then).
    router.proxy.cut(1_500);
    client.proxy.cut(400);
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    const err = await new HadisClient(client.nc).generate({ prompt: "a red bicycle", deadlineMs: 3_000 }).catch((e: unknown) => e);
    expect((err as HadisError).code).toBe("overloaded"); // the stand-in's answer: the request reached it
    expect(stand.asked()).toBe(1);
    expect(Date.now() - started).toBeLessThan(6_000);
  });

  it("sends a keyed request again when the connection drops before its reply", async () => {
    const client = await through("client");
    const stand = await slowRouter(t.nc, 1_000);
    const reply = new HadisClient(client.nc)
      .generate({ prompt: "a red bicycle", deadlineMs: 5_000, idempotencyKey: "cut-1" })
      .catch((e: unknown) => e);
    await waitFor(() => stand.asked() === 1, 2_000, "the request at the stand-in");
    client.proxy.cut(1_500); // the first answer comes while the client is away
    const err = await reply;
    expect((err as HadisError).code).toBe("overloaded");
    expect(stand.asked()).toBe(2);
  });

  it("does not send a request without a key twice, and says why no reply came", async () => {
    const client = await through("client");
    const stand = await slowRouter(t.nc, 1_000);
    const reply = new HadisClient(client.nc)
      .generate({ prompt: "a red bicycle", deadlineMs: 500 }, { timeoutMs: 3_000 })
      .catch((e: unknown) => e);
    await waitFor(() => stand.asked() === 1, 2_000, "the request at the stand-in");
    client.proxy.cut(1_500); // its answer comes while the client is away
    const err = (await reply) as HadisError;
    expect(err.code).toBe("deadline_exceeded");
    expect(err.message).toMatch(/no reply within 3000 ms; the connection to NATS dropped meanwhile/);
    expect(stand.asked()).toBe(1);
  });

  it("answers no_capacity when the connection does not come back in time", async () => {
    const client = await through("client");
    client.proxy.cut(3_000);
    await new Promise((r) => setTimeout(r, 50));
    const err = (await new HadisClient(client.nc)
      .generate({ prompt: "a red bicycle" }, { timeoutMs: 600 })
      .catch((e: unknown) => e)) as HadisError;
    expect(err.code).toBe("no_capacity");
    expect(err.message).toMatch(/not connected to NATS/);
  });

  it("answers a closed connection at once, as before (not a wait for a reconnect that cannot come)", async () => {
    const client = await through("client");
    await client.nc.close();
    const started = Date.now();
    const err = (await new HadisClient(client.nc)
      .generate({ prompt: "a red bicycle" }, { timeoutMs: 5_000 })
      .catch((e: unknown) => e)) as HadisError;
    expect(err.code).toBe("internal");
    expect(err.message).toMatch(/closed/);
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
