import { describe, expect, it } from "vitest";
import { fromPromise, SimulatedClock } from "xstate";
import { createRequestActor, RequestMachine } from "../../actors/request/request-machine.ts";
import { requestDeadlines } from "../../actors/request/deadlines.ts";
import { buildReply } from "../../actors/request/reply.ts";
import type { GenerateCall, GenerateOutcome, JudgeCall, JudgeOutcome, RouteCall, RouteDecision } from "../../actors/request/types.ts";
import type { GenerationOptions } from "../../contracts/messages.ts";
import { HadisError } from "../../contracts/errors.ts";
import type { Admission } from "../../contracts/admission.ts";
import { admitted } from "../../actors/routing/deadline-aware.ts";
import { madeBy, runToEnd } from "../helpers/request-machine.ts";

const PAIR = { light: "light-m", heavy: "heavy-m" };

interface Scenario {
  hard: boolean;
  accept?: boolean;
  skipJudge?: boolean;
  latencyMs?: Record<string, number>;
  /** Models whose generations fail, and with which error code (default generation_failed). */
  failModel?: string | string[];
  failCode?: "generation_failed" | "no_capacity";
  deadlineMs?: number;
  /** The least time a heavy generation takes, as the router has seen them. */
  floorMs?: number;
  quality?: "auto" | "fast" | "best";
  options?: GenerationOptions;
  /** The artifact's drops: no light image before the deadline, and work carrying this deadline (the SLO: half the deadline). */
  artifactDrops?: { workDeadlineAtMs: number };
  /** The plan is hadis-plus's (under the drops, its deadline-aware path against the SLO). */
  deadlineAware?: boolean;
  /** hadis-plus's admission, applied to the routed decision as the router's route actor does. */
  admission?: Admission;
}

/** Runs one request on a simulated clock; returns the outcome and what the actors saw. */
async function run(s: Scenario) {
  const clock = new SimulatedClock();
  const calls: string[] = [];
  const seen: { route?: RouteCall; generate: GenerateCall[]; aborted: string[] } = { generate: [], aborted: [] };
  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
  const machine = RequestMachine.provide({
    actors: {
      route: fromPromise<RouteDecision, RouteCall>(async ({ input }) => {
        calls.push("route");
        seen.route = input;
        const decision = {
          hard: s.hard,
          difficulty: s.hard ? 2 : -1,
          routerThreshold: 0.2,
          pair: PAIR,
          skipJudge: s.skipJudge ?? false,
          planEpoch: 7,
        };
        return s.admission ? admitted(decision, s.admission) : decision;
      }),
      generate: fromPromise<GenerateOutcome, GenerateCall>(async ({ input, signal }) => {
        calls.push(`generate:${input.model}`);
        seen.generate.push(input);
        signal.addEventListener("abort", () => seen.aborted.push(input.model), { once: true });
        const ms = s.latencyMs?.[input.model] ?? 100;
        await sleep(ms);
        if ([s.failModel ?? []].flat().includes(input.model))
          throw new HadisError(s.failCode ?? "generation_failed", `${input.model} fell over`);
        return madeBy(input.model, ms / 2);
      }),
      judge: fromPromise<JudgeOutcome, JudgeCall>(async ({ input }) => {
        calls.push(`judge:${input.model}`);
        await sleep(10);
        return { score: s.accept ? 0.9 : 0.1, threshold: 0.5, accept: s.accept ?? true };
      }),
    },
  });
  const actor = createRequestActor(machine, clock, {
    requestId: "r1",
    prompt: "a cat",
    seed: 1,
    receivedAtMs: 0,
    ...requestDeadlines({
      receivedAtMs: 0,
      deadlineMs: s.deadlineMs ?? 10_000,
      floorMs: () => s.floorMs ?? 0,
      ...(s.artifactDrops ? { drops: { ...s.artifactDrops, sloDeadlineAtMs: (s.deadlineMs ?? 10_000) / 2 } } : {}),
      deadlineAware: s.deadlineAware ?? false,
    }),
    ...(s.quality ? { quality: s.quality } : {}),
    ...(s.options ? { options: s.options } : {}),
  });
  return { outcome: await runToEnd(actor, clock), calls, seen };
}

describe("RequestMachine", () => {
  it("serves an easy prompt from the light model when the judge accepts", async () => {
    const { outcome, calls } = await run({ hard: false, accept: true });
    expect(calls).toEqual(["route", "generate:light-m", "judge:light-m"]);
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.route).toBe("light");
    expect(outcome.models).toEqual({ light: "light-m" });
    expect(outcome.judge?.score).toBe(0.9);
    expect(outcome.timings.lightMs).toBe(50);
    expect(outcome.timings.queueWaitMs).toBeGreaterThanOrEqual(50);
    expect(outcome.timings.totalMs).toBeGreaterThanOrEqual(110);
  });

  it("sends a hard prompt straight to the heavy model, skipping light and judge", async () => {
    const { outcome, calls } = await run({ hard: true });
    expect(calls).toEqual(["route", "generate:heavy-m"]);
    expect(outcome.ok && outcome.route).toBe("heavy");
  });

  it("escalates a rejected light image to the heavy model", async () => {
    const { outcome, calls } = await run({ hard: false, accept: false });
    expect(calls).toEqual(["route", "generate:light-m", "judge:light-m", "generate:heavy-m"]);
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.route).toBe("light->heavy");
    expect(outcome.models).toEqual({ light: "light-m", heavy: "heavy-m" });
    expect(outcome.image.model).toBe("heavy-m");
    expect(outcome.judge?.accept).toBe(false);
  });

  it("serves a rejected light image when the time left cannot fit the heavy model, and escalates when it can", async () => {
    // Light 100 ms + judge 10 ms: 9,890 ms of the 10 s deadline are left at the verdict.
    const late = await run({ hard: false, accept: false, floorMs: 9_950 });
    expect(late.calls).toEqual(["route", "generate:light-m", "judge:light-m"]);
    expect(late.outcome.ok && late.outcome.route).toBe("light");
    expect(late.outcome.ok && late.outcome.escalationSkipped).toBe(true);
    expect(late.outcome.ok && late.outcome.judge?.accept).toBe(false);
    expect(buildReply(late.outcome, "r", 1).fallback).toBe("no_time_for_heavy");
    const fits = await run({ hard: false, accept: false, floorMs: 9_000 });
    expect(fits.calls.at(-1)).toBe("generate:heavy-m");
    expect(fits.outcome.ok && fits.outcome.escalationSkipped).toBeFalsy();
    expect(buildReply(fits.outcome, "r", 1).fallback).toBeUndefined();
  });

  it("serves light without judging when the plan escalates nothing", async () => {
    const { outcome, calls } = await run({ hard: false, skipJudge: true });
    expect(calls).toEqual(["route", "generate:light-m"]);
    expect(outcome.ok && outcome.route).toBe("light");
  });

  it("expires when the deadline passes mid-generation", async () => {
    const { outcome, calls } = await run({ hard: true, deadlineMs: 300, latencyMs: { "heavy-m": 1000 } });
    expect(calls).toEqual(["route", "generate:heavy-m"]);
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.state).toBe("expired");
    expect((outcome.error as HadisError).code).toBe("deadline_exceeded");
    expect(outcome.timings.totalMs).toBe(300);
    expect(outcome.stage).toBe("heavy");
    // A hard prompt whose heavy generation failed, then out of time in the light stage: both said.
    const late = await run({ hard: true, deadlineMs: 300, failModel: "heavy-m", latencyMs: { "heavy-m": 100, "light-m": 1000 } });
    expect(late.outcome.ok || [late.outcome.state, late.outcome.stage, late.outcome.heavyError]).toEqual([
      "expired",
      "light",
      "heavy-m fell over",
    ]);
  });

  it("fails with the worker's error when generation fails and there is no image to serve", async () => {
    for (const s of [
      { hard: true, failModel: ["heavy-m", "light-m"] },
      { hard: false, failModel: "light-m" },
    ]) {
      const { outcome } = await run(s);
      expect(outcome.ok).toBe(false);
      if (outcome.ok) return;
      expect(outcome.state).toBe("failed");
      expect((outcome.error as HadisError).code).toBe("generation_failed");
    }
  });

  it("serves the light image it has when the escalated heavy generation fails, saying why", async () => {
    const { outcome, calls } = await run({ hard: false, accept: false, failModel: "heavy-m", latencyMs: { "heavy-m": 300 } });
    expect(calls).toEqual(["route", "generate:light-m", "judge:light-m", "generate:heavy-m"]);
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.route).toBe("light");
    expect(outcome.image.model).toBe("light-m");
    expect(outcome.models).toEqual({ light: "light-m" });
    expect(outcome.judge?.accept).toBe(false);
    expect(outcome.heavyError).toBe("heavy-m fell over");
    expect(outcome.escalationSkipped).toBeUndefined();
    expect(buildReply(outcome, "r", 1).fallback).toBe("heavy_failed");
    // Timings are the images': no heavy one was made; the total counts the attempt.
    expect([outcome.timings.heavyMs, outcome.timings.totalMs]).toEqual([0, 100 + 10 + 300]);
    // Whatever the heavy stage's error: the light image is there.
    const other = await run({ hard: false, accept: false, failModel: "heavy-m", failCode: "no_capacity" });
    expect(other.outcome.ok && other.outcome.route).toBe("light");
  });

  it("serves an escalated request's light image 25 ms before the deadline when its heavy image has not come (a hard prompt has none: it expires)", async () => {
    // Light 100 + judge 10, then a heavy generation that would end long after the 1 s deadline.
    const { outcome, calls } = await run({ hard: false, accept: false, deadlineMs: 1_000, latencyMs: { "heavy-m": 5_000 } });
    expect(calls).toEqual(["route", "generate:light-m", "judge:light-m", "generate:heavy-m"]);
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.route).toBe("light");
    expect(outcome.image.model).toBe("light-m");
    expect(outcome.heavyError).toBe("no heavy image 25 ms before the deadline");
    expect(buildReply(outcome, "r", 1).fallback).toBe("heavy_late"); // late, not failed
    expect(outcome.timings.totalMs).toBe(975);
    // The heavy image that comes in time is served as ever.
    const inTime = await run({ hard: false, accept: false, deadlineMs: 1_000, latencyMs: { "heavy-m": 800 } });
    expect(inTime.outcome.ok && inTime.outcome.route).toBe("light->heavy");
    const hard = await run({ hard: true, deadlineMs: 1_000, latencyMs: { "heavy-m": 5_000 } });
    expect(hard.outcome.ok || hard.outcome.state).toBe("expired");
  });

  it("under the artifact's drops, serves no light image early: a late heavy image is waited for, and work carries the shorter work deadline", async () => {
    // Deadline 2 s (the artifact's 2 × SLO); work deadline 1.5 s; the heavy image comes at 1.9 s.
    const { outcome, seen } = await run({
      hard: false,
      accept: false,
      deadlineMs: 2_000,
      latencyMs: { "heavy-m": 1_790 },
      artifactDrops: { workDeadlineAtMs: 1_500 },
    });
    expect(outcome.ok && outcome.route).toBe("light->heavy");
    expect(outcome.ok && outcome.timings.totalMs).toBeGreaterThan(1_850);
    expect(seen.generate.map((g) => g.deadlineAtMs)).toEqual([1_500, 1_500]);
    // Never come: the request ends unanswered at its own deadline, not with the light image.
    const never = await run({
      hard: false,
      accept: false,
      deadlineMs: 2_000,
      latencyMs: { "heavy-m": 9_000 },
      artifactDrops: { workDeadlineAtMs: 1_500 },
    });
    expect(never.outcome.ok || never.outcome.state).toBe("expired");
  });

  it("under the artifact's drops, keeps hadis-plus's deadline path against the SLO: the light image as the SLO nears, work still carrying 1.5 × SLO", async () => {
    // SLO 1 s (deadline 2 s, the artifact's 2 × SLO); work deadline 1.5 s; the heavy image would come at 1.9 s.
    const late = {
      hard: false,
      accept: false,
      deadlineMs: 2_000,
      latencyMs: { "heavy-m": 1_790 },
      artifactDrops: { workDeadlineAtMs: 1_500 },
    };
    const { outcome, seen } = await run({ ...late, deadlineAware: true });
    expect(outcome.ok && outcome.route).toBe("light");
    expect(outcome.ok && buildReply(outcome, "r", 1).fallback).toBe("heavy_late");
    expect(outcome.ok && outcome.timings.totalMs).toBe(975);
    expect(seen.generate.map((g) => g.deadlineAtMs)).toEqual([1_500, 1_500]);
    // The same request under another policy's plan waits for the late heavy image.
    const other = await run(late);
    expect(other.outcome.ok && other.outcome.route).toBe("light->heavy");
  });

  it("makes a hard prompt's image with the light model when the heavy one fails it, without judging it", async () => {
    const { outcome, calls } = await run({ hard: true, failModel: "heavy-m", latencyMs: { "heavy-m": 300, "light-m": 100 } });
    expect(calls).toEqual(["route", "generate:heavy-m", "generate:light-m"]);
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.route).toBe("light");
    expect(outcome.image.model).toBe("light-m");
    expect(outcome.judge).toBeUndefined();
    expect(outcome.heavyError).toBe("heavy-m fell over");
    expect([outcome.timings.heavyMs, outcome.timings.lightMs, outcome.timings.totalMs]).toEqual([0, 50, 400]);
    // Only after a failed generation: another error (no capacity for the heavy model, say) is the reply.
    const refused = await run({ hard: true, failModel: "heavy-m", failCode: "no_capacity" });
    expect(refused.calls).toEqual(["route", "generate:heavy-m"]);
    expect(refused.outcome.ok || (refused.outcome.error as HadisError).code).toBe("no_capacity");
  });

  it("carries the caller's quality to routing and its settings to every generation", async () => {
    const options = { steps: 12, width: 768, height: 768, negativePrompt: "blur" };
    const { seen } = await run({ hard: false, accept: false, quality: "auto", options });
    expect(seen.route).toMatchObject({ quality: "auto", options });
    expect(seen.generate.map((g) => [g.stage, g.options])).toEqual([
      ["light", options],
      ["heavy", options],
    ]);
  });

  it("with quality best, a failed heavy generation fails the request instead of falling back to the light model", async () => {
    const { outcome, calls } = await run({ hard: true, quality: "best", failModel: PAIR.heavy });
    expect(calls).toEqual(["route", "generate:heavy-m"]);
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect((outcome.error as HadisError).code).toBe("generation_failed");
    // Without the pin the same failure is served by the light model (the behaviour callers who did not pin keep).
    const unpinned = await run({ hard: true, failModel: PAIR.heavy });
    expect(unpinned.calls).toEqual(["route", "generate:heavy-m", "generate:light-m"]);
  });

  describe("under hadis-plus's admission", () => {
    const estimate = { leftMs: 900, lightMs: 100, judgeMs: 10, heavyMs: 2_700 };

    it("tells the route actor the time left, and serves a rejected light image when the admission ruled the heavy stage out", async () => {
      const { outcome, calls, seen } = await run({
        hard: false,
        accept: false,
        deadlineMs: 900,
        admission: { choice: "light", ...estimate },
      });
      expect(seen.route?.leftMs).toBe(900);
      expect(calls).toEqual(["route", "generate:light-m", "judge:light-m"]);
      expect(outcome.ok && outcome.escalationSkipped).toBe(true);
      const reply = buildReply(outcome, "r1", 1);
      expect(reply.fallback).toBe("no_time_for_heavy");
      expect(reply.admission).toEqual({ choice: "light", ...estimate });
    });

    it("escalates as ever when the admission chose the whole cascade", async () => {
      const { outcome, calls } = await run({ hard: false, accept: false, admission: { choice: "cascade", ...estimate, leftMs: 10_000 } });
      expect(calls).toEqual(["route", "generate:light-m", "judge:light-m", "generate:heavy-m"]);
      expect(buildReply(outcome, "r1", 1)).toMatchObject({ route: "light->heavy", admission: { choice: "cascade" } });
    });

    describe("a prompt sent straight to the heavy model whose image is late", () => {
      // Deadline 2,000 ms; the light model needs 200 ms from now: the race starts at 1,775 ms
      // (the reply's 25 ms margin), and the light image comes at 1,875 ms.
      const late = { hard: true, deadlineMs: 2_000, floorMs: 200, admission: { choice: "heavy" as const, ...estimate, leftMs: 2_000 } };

      it("races it with the light model at the last moment the light model can answer: the light image is served, heavy_late", async () => {
        const { outcome, calls, seen } = await run({ ...late, latencyMs: { [PAIR.heavy]: 5_000, [PAIR.light]: 100 } });
        expect(calls).toEqual(["route", "generate:heavy-m", "generate:light-m"]);
        expect(seen.generate[1]).toMatchObject({ stage: "light", model: PAIR.light });
        expect(seen.generate[1].wantsVerdict).toBeUndefined(); // unjudged: nothing left to escalate to
        expect(outcome.ok).toBe(true);
        if (!outcome.ok) return;
        expect(outcome.timings.totalMs).toBeGreaterThanOrEqual(1_875);
        expect(outcome.timings.totalMs).toBeLessThan(2_000);
        expect(buildReply(outcome, "r1", 1)).toMatchObject({ route: "light", servedBy: PAIR.light, fallback: "heavy_late" });
        expect(seen.aborted).toEqual([PAIR.heavy]); // its heavy work withdrawn
      });

      it("serves the heavy image when it comes first, and withdraws the light generation", async () => {
        const { outcome, seen } = await run({ ...late, latencyMs: { [PAIR.heavy]: 1_800, [PAIR.light]: 100 } });
        expect(buildReply(outcome, "r1", 1)).toMatchObject({ route: "heavy", servedBy: PAIR.heavy });
        expect(buildReply(outcome, "r1", 1).fallback).toBeUndefined();
        expect(seen.aborted).toEqual([PAIR.light]);
      });

      it("does not race when the light model could not answer in the time left anyway (no load for nothing)", async () => {
        const { calls } = await run({ ...late, floorMs: 2_500, latencyMs: { [PAIR.heavy]: 5_000, [PAIR.light]: 100 } });
        expect(calls).toEqual(["route", "generate:heavy-m"]);
      });

      it("a heavy generation that fails while the light model races it waits for the light image (not a second light generation)", async () => {
        const { outcome, calls } = await run({ ...late, failModel: PAIR.heavy, latencyMs: { [PAIR.heavy]: 1_800, [PAIR.light]: 100 } });
        expect(calls).toEqual(["route", "generate:heavy-m", "generate:light-m"]);
        expect(buildReply(outcome, "r1", 1)).toMatchObject({ route: "light", servedBy: PAIR.light });
        // And when the light one fails too, the request fails with the heavy model's error, not at its deadline.
        const both = await run({ ...late, failModel: [PAIR.heavy, PAIR.light], latencyMs: { [PAIR.heavy]: 1_800, [PAIR.light]: 100 } });
        expect(both.calls).toEqual(["route", "generate:heavy-m", "generate:light-m"]);
        expect(both.outcome.ok).toBe(false);
        if (both.outcome.ok) return;
        expect((both.outcome.error as HadisError).code).toBe("generation_failed");
        expect(both.outcome.timings.totalMs).toBeLessThan(1_900);
      });

      it("does not race without hadis-plus's admission, nor for a caller who pinned the heavy model", async () => {
        for (const s of [
          { ...late, admission: undefined },
          { ...late, quality: "best" as const },
        ]) {
          const { outcome, calls } = await run({ ...s, latencyMs: { [PAIR.heavy]: 5_000, [PAIR.light]: 100 } });
          expect(calls).toEqual(["route", "generate:heavy-m"]);
          expect(outcome.ok).toBe(false);
        }
      });
    });

    it("sends a light-routed prompt straight to the heavy model, and a hard one to the light model unjudged, marked", async () => {
      const straight = await run({ hard: false, admission: { choice: "heavy", ...estimate } });
      expect(straight.calls).toEqual(["route", "generate:heavy-m"]);
      expect(buildReply(straight.outcome, "r1", 1)).toMatchObject({ route: "heavy", admission: { choice: "heavy" } });
      const fallen = await run({ hard: true, admission: { choice: "light", ...estimate } });
      expect(fallen.calls).toEqual(["route", "generate:light-m"]);
      const reply = buildReply(fallen.outcome, "r1", 1);
      expect(reply).toMatchObject({ route: "light", servedBy: "light-m", fallback: "no_time_for_heavy", admission: { choice: "light" } });
    });
  });
});
