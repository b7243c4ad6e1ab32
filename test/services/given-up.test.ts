/**
 * Items JetStream gave up on (max-deliveries advisories): the stage waiting on the named item
 * fails with generation_failed, its item is removed when it is this router's, and nothing else
 * changes. Unit level, on the advisory JSON as nats-server sends it; `test/reliability/given-up.test.ts`
 * runs it against a real server.
 */
import { describe, expect, it } from "vitest";
import { failGivenUp } from "../../services/router/given-up.ts";
import { PendingWork } from "../../services/router/pending.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { HadisError } from "../../contracts/errors.ts";
import { waiting } from "../helpers/pending.ts";

/** An advisory as nats-server 2.x sends it. */
const advisory = (seq: number, stream = "HADIS_WORK") =>
  new TextEncoder().encode(
    JSON.stringify({
      type: "io.nats.jetstream.advisory.v1.max_deliver",
      id: "loQf9I6eDUdFTq5Htjoa8W",
      timestamp: "2026-12-02T00:44:34.070069447Z",
      stream,
      consumer: "work-m",
      stream_seq: seq,
      deliveries: 5,
    }),
  );

function deps(pending: PendingWork) {
  const removed: number[] = [];
  return {
    removed,
    queue: { remove: async (seq: number) => (removed.push(seq), true) },
    pending,
    workStream: "HADIS_WORK",
    log: createLogger("test", "silent"),
  };
}

describe("an item JetStream gave up on", () => {
  it("fails the stage waiting on it with generation_failed and removes the item; other entries wait on", () => {
    const pending = new PendingWork();
    const lost = waiting(pending, "lost", 7);
    const other = waiting(pending, "other", 8);
    const d = deps(pending);
    expect(failGivenUp(d, advisory(7))).toBe(1);
    expect(lost.ended).toHaveLength(1);
    const err = lost.ended[0] as HadisError;
    expect(err).toBeInstanceOf(HadisError);
    expect(err.code).toBe("generation_failed");
    expect(err.message).toMatch(/light generation on m: it was delivered 5 times and never acknowledged/);
    expect(pending.get("lost", "light")).toBeUndefined();
    expect(d.removed).toEqual([7]);
    expect(other.ended).toEqual([]);
    expect(pending.get("other", "light")).toBe(other);
  });

  it("does not remove an item another router queued (a keyed retry's), but fails the stage waiting on it", () => {
    const pending = new PendingWork();
    const retry = waiting(pending, "k:abc", 9, false);
    const d = deps(pending);
    expect(failGivenUp(d, advisory(9))).toBe(1);
    expect((retry.ended[0] as HadisError).code).toBe("generation_failed");
    expect(d.removed).toEqual([]);
  });

  it("ignores another stream's advisory, an item this router does not wait on, and one that does not parse", () => {
    const pending = new PendingWork();
    const entry = waiting(pending, "r", 7);
    const d = deps(pending);
    expect(failGivenUp(d, advisory(7, "KV_hadis-plan"))).toBe(0);
    expect(failGivenUp(d, advisory(70))).toBe(0);
    expect(failGivenUp(d, new TextEncoder().encode("{not json"))).toBe(0);
    expect(failGivenUp(d, new TextEncoder().encode(JSON.stringify({ stream: "HADIS_WORK", stream_seq: "7" })))).toBe(0);
    expect(entry.ended).toEqual([]);
    expect(pending.get("r", "light")).toBe(entry);
    expect(d.removed).toEqual([]);
  });
});
