/** The discriminator's answer when its judge fails: `judge_failed` (the router then serves the light image), whatever the judge threw. */
import { describe, expect, it } from "vitest";
import { waitFor } from "../helpers/processes.ts";
import { Packr } from "msgpackr";
import { HadisError } from "../../contracts/errors.ts";
import { encode } from "../../contracts/envelope.ts";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { startDiscriminator } from "../../services/discriminator/main.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";

const t = useNatsServer("discriminator-test");
const packr = new Packr({ useRecords: false });

describe("discriminator", () => {
  it("answers judge_failed for an error of the judge's thread (internal) or a plain one, and passes a typed refusal on", async () => {
    const s = buildSubjects("disc-fail");
    let failure: unknown = new HadisError("internal", "onnx thread exited (code 1)");
    const judge = { kind: "broken", score: async () => Promise.reject(failure), thresholdFor: () => 0, close: async () => undefined };
    const disc = await startDiscriminator({ nc: t.nc, subjects: s, judge, models: ["m"], log: createLogger("test", "error") });
    const ask = async () => {
      const msg = await t.nc.request(
        s.judge,
        encode({ v: 1, requestId: "r1", prompt: "a cat", model: "m", image: new Uint8Array([1]), planEpoch: 0 }),
        { timeout: 5_000 },
      );
      return packr.unpack(msg.data).error as { code: string; message: string };
    };
    try {
      expect(await ask()).toMatchObject({ code: "judge_failed", message: "onnx thread exited (code 1)" });
      failure = new RangeError("Invalid typed array length");
      expect((await ask()).code).toBe("judge_failed");
      failure = new HadisError("invalid_request", "image: not a PNG", { field: "image" });
      expect((await ask()).code).toBe("invalid_request");
    } finally {
      await disc.stop();
    }
  });

  it("holds at most its in-flight limit of judge requests: past it, overloaded at once (the router then serves the light image)", async () => {
    const s = buildSubjects("disc-busy");
    const release: (() => void)[] = [];
    const judge = {
      kind: "slow",
      score: () => new Promise<number[]>((r) => release.push(() => r([0.5]))),
      thresholdFor: () => 0,
      close: async () => undefined,
    };
    const disc = await startDiscriminator({
      nc: t.nc,
      subjects: s,
      judge,
      models: ["m"],
      log: createLogger("test", "silent"),
      maxInFlight: 3,
    });
    const ask = (i: number) =>
      t.nc.request(s.judge, encode({ v: 1, requestId: `r${i}`, prompt: "a cat", model: "m", image: new Uint8Array([1]), planEpoch: 0 }), {
        timeout: 5_000,
      });
    try {
      const held = [0, 1, 2].map(ask);
      await waitFor(() => release.length === 3, 5_000, "three requests held");
      const refused = packr.unpack((await ask(3)).data).error as { code: string; details: { retryAfterMs: number } };
      expect(refused.code).toBe("overloaded");
      expect(refused.details.retryAfterMs).toBeGreaterThan(0);
      release.forEach((r) => r());
      for (const m of await Promise.all(held)) expect(packr.unpack(m.data).score).toBe(0.5);
      // Room again once they are answered.
      const again = ask(4);
      await waitFor(() => release.length === 4, 5_000, "the fourth request held");
      release[3]();
      expect(packr.unpack((await again).data).score).toBe(0.5);
    } finally {
      await disc.stop();
    }
  });
  it("drops unscored a judge request whose router has stopped waiting (answerByMs) while it waited behind a slow judge, and counts it", async () => {
    const s = buildSubjects("disc-expired");
    const scored: string[][] = [];
    const release: (() => void)[] = [];
    const judge = {
      kind: "one-thread",
      concurrency: 1,
      maxBatch: 4,
      score: (batch: readonly { prompt: string }[]) => {
        scored.push(batch.map((b) => b.prompt));
        return new Promise<number[]>((r) => release.push(() => r(batch.map(() => 0.5))));
      },
      thresholdFor: () => 0,
      close: async () => undefined,
    };
    const expiredCount = async () => Number(/^hadis_judge_expired_total (\S+)$/m.exec(await metricsText())?.[1] ?? 0);
    const before = await expiredCount();
    const disc = await startDiscriminator({ nc: t.nc, subjects: s, judge, models: ["m"], log: createLogger("test", "silent") });
    const ask = (prompt: string, answerByMs?: number) =>
      t.nc.request(
        s.judge,
        encode({
          v: 1,
          requestId: prompt,
          prompt,
          model: "m",
          image: new Uint8Array([1]),
          planEpoch: 0,
          ...(answerByMs ? { answerByMs } : {}),
        }),
        { timeout: 5_000 },
      );
    try {
      const first = ask("first");
      await waitFor(() => release.length === 1, 5_000, "the first request scoring");
      const lateBy = Date.now() + 150;
      const late = ask("late", lateBy);
      const live = ask("live", Date.now() + 60_000);
      const unbounded = ask("unbounded");
      // The discriminator (on this connection) has them once the server answers a flush; then "late"'s time passes.
      await t.nc.flush();
      while (Date.now() <= lateBy + 20) await new Promise((r) => setTimeout(r, 50));
      release.shift()!();
      await waitFor(() => release.length === 1, 5_000, "the second call");
      release.shift()!();
      expect(packr.unpack((await first).data).score).toBe(0.5);
      expect((packr.unpack((await late).data).error as { code: string }).code).toBe("deadline_exceeded");
      expect(packr.unpack((await live).data).score).toBe(0.5);
      expect(packr.unpack((await unbounded).data).score).toBe(0.5);
      expect(scored).toEqual([["first"], ["live", "unbounded"]]); // one batch of the two still awaited
      expect((await expiredCount()) - before).toBe(1);
    } finally {
      await disc.stop();
    }
  });
});
