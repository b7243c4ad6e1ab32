/** The client's wait for a serving system, against a real nats-server and a stand-in router. */
import { describe, expect, it } from "vitest";
import { replyError } from "../../services/lib/nats.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { HadisClient } from "../../services/lib/client.ts";
import { HadisError, type ErrorCode } from "../../contracts/errors.ts";

const t = useNatsServer("test-client-wait");

/** A stand-in router that answers every request with `code`; `asked()` counts the requests. */
async function refusing(code: ErrorCode) {
  let asked = 0;
  const sub = t.nc.subscribe("hadis.generate", { callback: (_e, m) => void (asked++, replyError(m, new HadisError(code, `stand-in says ${code}`), "msgpack")) });
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
