/**
 * A reply says when its image is not the one the cascade meant (`fallback`), and a client reads a
 * reply carrying fields or reasons it does not know (a newer router's) rather than refusing it.
 */
import { describe, expect, it } from "vitest";
import { buildReply } from "../../actors/request/reply.ts";
import { NO_TIME_TO_JUDGE, type RequestOutcome } from "../../actors/request/types.ts";
import { encode } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import type { Msg } from "../../services/nats/connection.ts";
import { readGenerateReply } from "../../services/client/client.ts";

const timings = { routeMs: 1, queueWaitMs: 2, lightMs: 3, judgeMs: 4, heavyMs: 0, totalMs: 10 };
const light = {
  image: new Uint8Array([1, 2, 3]),
  width: 16,
  height: 16,
  model: "light-m",
  workerId: "w-0",
  batchSize: 1,
  queueWaitMs: 2,
  execMs: 3,
};
const decision = {
  hard: false,
  difficulty: -1,
  routerThreshold: 0.2,
  pair: { light: "light-m", heavy: "heavy-m" },
  skipJudge: false,
  planEpoch: 3,
};
const served = (extra: Partial<Extract<RequestOutcome, { ok: true }>>): RequestOutcome => ({
  ok: true,
  route: "light",
  image: light,
  models: { light: "light-m" },
  decision,
  timings,
  ...extra,
});

describe("buildReply's fallback", () => {
  it("is absent when the cascade ran as planned: judged and accepted, or not judged by the plan's choice", () => {
    expect(buildReply(served({ judge: { score: 0.4, threshold: 0.1, accept: true } }), "r1", 7).fallback).toBeUndefined();
    expect(buildReply(served({ decision: { ...decision, skipJudge: true } }), "r1", 7).fallback).toBeUndefined();
  });

  it("names why the light image was served in place of more", () => {
    const rejected = { score: 0.01, threshold: 0.1, accept: false };
    expect(buildReply(served({ judge: rejected, heavyError: "heavy-m fell over" }), "r1", 7).fallback).toBe("heavy_failed");
    expect(buildReply(served({ judge: rejected, escalationSkipped: true }), "r1", 7).fallback).toBe("no_time_for_heavy");
    expect(buildReply(served({ judgeError: "judge: timeout" }), "r1", 7).fallback).toBe("judge_failed");
    expect(buildReply(served({ judgeError: NO_TIME_TO_JUDGE }), "r1", 7).fallback).toBe("no_time_to_judge");
    // A hard prompt whose heavy generation failed, made by the light model (not judged).
    expect(buildReply(served({ decision: { ...decision, hard: true }, heavyError: "no worker" }), "r1", 7).fallback).toBe("heavy_failed");
    // No heavy image as the deadline neared: late, not failed.
    expect(
      buildReply(served({ judge: rejected, heavyError: "no heavy image 25 ms before the deadline", heavyLate: true }), "r1", 7).fallback,
    ).toBe("heavy_late");
  });

  it("says when the heavy stage was made by another model than the decided heavy one (moved with the plan)", () => {
    const heavy = { ...light, model: "heavy-m" };
    expect(
      buildReply(served({ route: "heavy", image: heavy, models: { heavy: "heavy-m" }, decision: { ...decision, hard: true } }), "r1", 7)
        .fallback,
    ).toBeUndefined();
    const moved = { ...light, model: "other-m" };
    expect(
      buildReply(served({ route: "light->heavy", image: moved, models: { light: "light-m", heavy: "other-m" } }), "r1", 7).fallback,
    ).toBe("heavy_moved");
  });
});

describe("readGenerateReply", () => {
  const reply = buildReply(served({ judgeError: "judge: timeout" }), "r1", 7);
  const msg = (body: unknown) => ({ data: encode(body), headers: undefined }) as unknown as Msg;

  it("reads a reply with fields it does not know, at the top and inside timings and models, and drops them", () => {
    const read = readGenerateReply(
      msg({ ...reply, someday: "a new field", timings: { ...reply.timings, uploadMs: 5 }, models: { ...reply.models, refiner: "x" } }),
    );
    expect(read.fallback).toBe("judge_failed");
    expect(read.timings.totalMs).toBe(10);
    expect("someday" in read).toBe(false);
    expect("uploadMs" in read.timings).toBe(false);
  });

  it("still refuses a field it knows with the wrong type; keeps a fallback reason it does not know as its text", () => {
    expect(() => readGenerateReply(msg({ ...reply, seed: "seven" }))).toThrow(HadisError);
    expect(() => readGenerateReply(msg({ ...reply, fallback: 7 }))).toThrow(HadisError);
    expect(readGenerateReply(msg({ ...reply, fallback: "a_reason_added_later" })).fallback).toBe("a_reason_added_later");
  });

  it("reads an older router's escalated route, named with an arrow, as the ASCII one", () => {
    expect(readGenerateReply(msg({ ...reply, route: "light\u2192heavy" })).route).toBe("light->heavy");
    expect(readGenerateReply(msg({ ...reply, route: "light->heavy" })).route).toBe("light->heavy");
    expect(() => readGenerateReply(msg({ ...reply, route: "sideways" }))).toThrow(HadisError);
  });
});
