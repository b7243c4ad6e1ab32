/**
 * Preview, then upgrade, as the request machine decides it: on a simulated clock, when a request
 * that asked for a preview emits its light image (only as it escalates to the heavy model), and
 * what the caller's last message is then, whatever happens to the heavy stage.
 */
import { describe, expect, it } from "vitest";
import { fromPromise, SimulatedClock } from "xstate";
import { madeBy, runToEnd } from "../helpers/request-machine.ts";
import { createRequestActor, RequestMachine } from "../../actors/request/request-machine.ts";
import { buildPreview, buildReply, finalReply } from "../../actors/request/reply.ts";
import type {
  GenerateCall,
  GenerateOutcome,
  JudgeCall,
  JudgeOutcome,
  PreviewEvent,
  RouteCall,
  RouteDecision,
} from "../../actors/request/types.ts";
import { HadisError } from "../../contracts/errors.ts";
import { Fallbacks, Routes } from "../../contracts/messages.ts";

const PAIR = { light: "light-m", heavy: "heavy-m" };
const LIGHT_MS = 100;
const JUDGE_MS = 10;
const HEAVY_MS = 300;

interface Scenario {
  preview?: boolean;
  hard?: boolean;
  accept?: boolean;
  judgeFails?: boolean;
  heavyFails?: boolean;
  heavyMs?: number;
  floorMs?: number;
  deadlineMs?: number;
  /** The artifact's drops: no light image served in the heavy stage's place. */
  noLightFallback?: boolean;
}

/** Runs one request on a simulated clock: its outcome, and each preview with the time it came (ms). */
async function run(s: Scenario) {
  const clock = new SimulatedClock();
  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
  const machine = RequestMachine.provide({
    actors: {
      route: fromPromise<RouteDecision, RouteCall>(async () => ({
        hard: s.hard ?? false,
        difficulty: s.hard ? 2 : -1,
        routerThreshold: 0.2,
        pair: PAIR,
        skipJudge: false,
        planEpoch: 3,
      })),
      generate: fromPromise<GenerateOutcome, GenerateCall>(async ({ input }) => {
        const ms = input.stage === "light" ? LIGHT_MS : (s.heavyMs ?? HEAVY_MS);
        await sleep(ms);
        if (input.stage === "heavy" && s.heavyFails) throw new HadisError("generation_failed", "heavy fell over");
        return madeBy(input.model, ms, input.stage === "light" ? 1 : 2);
      }),
      judge: fromPromise<JudgeOutcome, JudgeCall>(async () => {
        await sleep(JUDGE_MS);
        if (s.judgeFails) throw new HadisError("judge_failed", "no judge");
        return { score: s.accept ? 0.9 : 0.1, threshold: 0.5, accept: s.accept ?? false };
      }),
    },
  });
  const actor = createRequestActor(machine, clock, {
    requestId: "r1",
    prompt: "a cat",
    seed: 5,
    receivedAtMs: 0,
    deadlineAtMs: s.deadlineMs ?? 10_000,
    ...(s.noLightFallback ? { lightFallback: false } : { floorMs: () => s.floorMs ?? 0 }),
    ...(s.preview !== undefined ? { preview: s.preview } : {}),
  });
  const previews: { atMs: number; event: PreviewEvent }[] = [];
  actor.on("preview", (event) => previews.push({ atMs: clock.now(), event }));
  const outcome = await runToEnd(actor, clock);
  return { outcome, previews, endedAtMs: clock.now() };
}

describe("when a request sends its light image as a preview", () => {
  it("sends the light image the judge rejected as the heavy stage starts, then ends on the heavy image", async () => {
    const { outcome, previews, endedAtMs } = await run({ preview: true });
    expect(previews).toHaveLength(1);
    const [{ atMs, event }] = previews;
    // Right after the verdict, well before the heavy image.
    expect(atMs).toBeGreaterThanOrEqual(LIGHT_MS + JUDGE_MS);
    expect(atMs).toBeLessThan(LIGHT_MS + JUDGE_MS + 20);
    expect(endedAtMs - atMs).toBeGreaterThanOrEqual(HEAVY_MS);
    expect(event.outcome.route).toBe(Routes.light);
    expect(event.outcome.image.model).toBe(PAIR.light);
    expect(event.outcome.judge).toEqual({ score: 0.1, threshold: 0.5, accept: false });
    expect(event.outcome.timings.judgeMs).toBeGreaterThanOrEqual(JUDGE_MS);
    expect(event.outcome.timings.totalMs).toBe(atMs);
    expect(outcome).toMatchObject({ ok: true, route: Routes.lightThenHeavy, image: { model: PAIR.heavy } });
  });

  it("sends none when the request did not ask, however it is served", async () => {
    const { outcome, previews } = await run({});
    expect(previews).toEqual([]);
    expect(outcome).toMatchObject({ ok: true, route: Routes.lightThenHeavy });
    expect((await run({ preview: false })).previews).toEqual([]);
  });

  it("sends none when there is one image only: accepted, a hard prompt, no time for the heavy model, the judge down", async () => {
    const accepted = await run({ preview: true, accept: true });
    expect(accepted.previews).toEqual([]);
    expect(accepted.outcome).toMatchObject({ ok: true, route: Routes.light });

    const hard = await run({ preview: true, hard: true });
    expect(hard.previews).toEqual([]);
    expect(hard.outcome).toMatchObject({ ok: true, route: Routes.heavy });

    // Rejected, but the heavy model's least time does not fit what is left: the light image is final.
    const noTime = await run({ preview: true, floorMs: 60_000 });
    expect(noTime.previews).toEqual([]);
    expect(noTime.outcome).toMatchObject({ ok: true, route: Routes.light, escalationSkipped: true });

    const judgeDown = await run({ preview: true, judgeFails: true });
    expect(judgeDown.previews).toEqual([]);
    expect(judgeDown.outcome).toMatchObject({ ok: true, route: Routes.light, judgeError: "no judge" });
  });

  it("ends with the light image as the fallback when the heavy stage fails or runs late after the preview", async () => {
    const failed = await run({ preview: true, heavyFails: true });
    expect(failed.previews).toHaveLength(1);
    if (!failed.outcome.ok) throw new Error("expected the light image");
    expect(buildReply(failed.outcome, "r1", 5)).toMatchObject({ route: Routes.light, fallback: Fallbacks.heavyFailed });

    const late = await run({ preview: true, heavyMs: 5_000, deadlineMs: 1_000 });
    expect(late.previews).toHaveLength(1);
    if (!late.outcome.ok) throw new Error("expected the light image");
    expect(buildReply(late.outcome, "r1", 5)).toMatchObject({ route: Routes.light, fallback: Fallbacks.heavyLate });
  });

  it("ends with a typed error after the preview when no light image may stand in (the artifact's drops)", async () => {
    const { outcome, previews } = await run({ preview: true, heavyMs: 5_000, deadlineMs: 1_000, noLightFallback: true });
    expect(previews).toHaveLength(1);
    expect(outcome).toMatchObject({ ok: false, state: "expired" });
    if (outcome.ok) return;
    expect(() => buildReply(outcome, "r1", 5)).toThrow(expect.objectContaining({ code: "deadline_exceeded" }));
  });
});

describe("the preview and final messages", () => {
  it("a preview is the light image's reply marked final: false; the last reply says final: true only when a preview was asked", async () => {
    const { outcome, previews } = await run({ preview: true });
    const preview = buildPreview(previews[0].event, "r1", 5);
    expect(preview).toMatchObject({
      requestId: "r1",
      route: Routes.light,
      servedBy: PAIR.light,
      models: { light: PAIR.light },
      score: 0.1,
      threshold: 0.5,
      seed: 5,
      final: false,
    });
    expect(preview.fallback).toBeUndefined();
    expect(preview.image).toEqual(new Uint8Array([1]));
    if (!outcome.ok) throw new Error("expected the heavy image");
    const reply = buildReply(outcome, "r1", 5);
    expect(reply.final).toBeUndefined();
    expect(finalReply(reply, true)).toMatchObject({ final: true, servedBy: PAIR.heavy, image: new Uint8Array([2]) });
    expect(finalReply(reply, false)).toBe(reply);
  });
});
