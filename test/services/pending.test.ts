/** A router's pending work keyed by request and stage: both stages of one request may wait at once (hadis-plus's race). */
import { describe, expect, it } from "vitest";
import { PendingWork } from "../../services/router/pending.ts";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { waiting } from "../helpers/pending.ts";

const result = (requestId: string, stage: "light" | "heavy", model: string) =>
  encode({
    v: PROTOCOL_VERSION,
    ok: true,
    requestId,
    stage,
    model,
    workerId: "w1",
    image: new Uint8Array([1]),
    width: 8,
    height: 8,
    batchSize: 1,
    queueWaitMs: 0,
    execMs: 1,
  });

describe("PendingWork", () => {
  it("holds a light and a heavy generation of one request at once, and gives each result to its own stage", () => {
    const pending = new PendingWork();
    const light = waiting(pending, "r1", 1);
    const ended: unknown[] = [];
    const heavy = {
      item: { ...light.item, stage: "heavy" as const, model: "h" },
      stage: "heavy" as const,
      seq: 2,
      own: true,
      ended,
      resolve: (x: unknown) => void ended.push(x),
      reject: (err: unknown) => void ended.push(err),
    };
    pending.wait(heavy);
    expect(pending.get("r1", "light")).toBe(light);
    expect(pending.get("r1", "heavy")).toBe(heavy);
    expect(pending.waitingByModel()).toEqual(
      new Map([
        ["m", 1],
        ["h", 1],
      ]),
    );
    pending.deliver(result("r1", "heavy", "h"));
    expect(heavy.ended).toHaveLength(1);
    expect(light.ended).toHaveLength(0);
    expect(pending.get("r1", "heavy")).toBeUndefined();
    // A second copy of the heavy result is a duplicate, not the light stage's answer.
    pending.deliver(result("r1", "heavy", "h"));
    expect(pending.duplicates).toBe(1);
    expect(light.ended).toHaveLength(0);
    pending.deliver(result("r1", "light", "m"));
    expect(light.ended).toHaveLength(1);
    expect(pending.size).toBe(0);
  });
});
