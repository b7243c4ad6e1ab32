/** The request machine and a verdict that comes with the light image (judged on the worker): no judge call then; the judge is asked otherwise. */
import { describe, expect, it } from "vitest";
import { fromPromise, SimulatedClock } from "xstate";
import { madeBy, runToEnd } from "../helpers/request-machine.ts";
import { createRequestActor, RequestMachine } from "../../actors/request/request-machine.ts";
import type { GenerateCall, GenerateOutcome, JudgeCall, JudgeOutcome, RouteCall, RouteDecision } from "../../actors/request/types.ts";

interface Scenario {
  /** The verdict the worker sends with the light image (none: a worker that cannot judge). */
  workerVerdict?: { accept: boolean; judgeMs: number };
  /** The discriminator's verdict when asked. */
  judgeAccepts?: boolean;
  skipJudge?: boolean;
  quality?: "fast";
  floorMs?: number;
  /** The caller asked for the light image as a preview when it is escalated. */
  preview?: boolean;
}

/** Runs one request on a simulated clock: light takes 100 ms (50 of it executing), heavy 200 ms, the judge 10 ms. */
async function run(s: Scenario) {
  const clock = new SimulatedClock();
  const calls: string[] = [];
  const generated: GenerateCall[] = [];
  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
  const machine = RequestMachine.provide({
    actors: {
      route: fromPromise<RouteDecision, RouteCall>(async () => {
        calls.push("route");
        return {
          hard: false,
          difficulty: -1,
          routerThreshold: 0.2,
          pair: { light: "l", heavy: "h" },
          skipJudge: s.skipJudge ?? false,
          planEpoch: 3,
        };
      }),
      generate: fromPromise<GenerateOutcome, GenerateCall>(async ({ input }) => {
        calls.push(`generate:${input.model}`);
        generated.push(input);
        const ms = input.stage === "light" ? 100 : 200;
        await sleep(ms);
        const verdict =
          input.wantsVerdict && s.workerVerdict
            ? {
                score: s.workerVerdict.accept ? 0.8 : 0.2,
                threshold: 0.5,
                accept: s.workerVerdict.accept,
                judgeMs: s.workerVerdict.judgeMs,
              }
            : undefined;
        return { ...madeBy(input.model, ms / 2), ...(verdict ? { verdict } : {}) };
      }),
      judge: fromPromise<JudgeOutcome, JudgeCall>(async () => {
        calls.push("judge");
        await sleep(10);
        return { score: s.judgeAccepts ? 0.9 : 0.1, threshold: 0.5, accept: s.judgeAccepts ?? true };
      }),
    },
  });
  const actor = createRequestActor(machine, clock, {
    requestId: "r1",
    prompt: "a cat",
    seed: 1,
    receivedAtMs: 0,
    deadlineAtMs: 10_000,
    floorMs: () => s.floorMs ?? 0,
    ...(s.quality ? { quality: s.quality } : {}),
    ...(s.preview ? { preview: true } : {}),
  });
  const previews: string[] = [];
  actor.on("preview", (event) => void previews.push(event.outcome.ok ? event.outcome.image.model : "error"));
  return { outcome: await runToEnd(actor, clock), calls, generated, previews };
}

describe("RequestMachine with a verdict judged on the worker", () => {
  it("asks the worker for a verdict on a light image it will judge, and not when it will not", async () => {
    const judged = await run({ workerVerdict: { accept: true, judgeMs: 5 } });
    expect(judged.generated[0].wantsVerdict).toBe(true);
    const unjudged = await run({ skipJudge: true, workerVerdict: { accept: true, judgeMs: 5 } });
    expect(unjudged.generated[0].wantsVerdict).toBeUndefined();
    expect(unjudged.calls).toEqual(["route", "generate:l"]);
  });

  it("serves the light image on the worker's accepting verdict without calling the judge, timing the worker's judging as the judge stage", async () => {
    const { outcome, calls } = await run({ workerVerdict: { accept: true, judgeMs: 5 } });
    expect(calls).toEqual(["route", "generate:l"]);
    expect(outcome).toMatchObject({ ok: true, route: "light", judge: { score: 0.8, threshold: 0.5, accept: true } });
    // 100 ms of wall time: 50 executing, 5 judging on the worker, the rest waiting.
    expect(outcome.timings).toMatchObject({ lightMs: 50, judgeMs: 5, queueWaitMs: 45 });
    expect(outcome.ok && outcome.judge).not.toHaveProperty("judgeMs");
  });

  it("escalates on the worker's rejecting verdict without calling the judge", async () => {
    const { outcome, calls } = await run({ workerVerdict: { accept: false, judgeMs: 5 } });
    expect(calls).toEqual(["route", "generate:l", "generate:h"]);
    expect(outcome).toMatchObject({ ok: true, route: "light->heavy", judge: { accept: false } });
  });

  it("sends the light image as a preview when the worker's verdict escalates it, as on the judge's", async () => {
    const { outcome, previews } = await run({ workerVerdict: { accept: false, judgeMs: 5 }, preview: true });
    expect(previews).toEqual(["l"]);
    expect(outcome).toMatchObject({ ok: true, route: "light->heavy" });
  });

  it("serves the light image on a rejecting worker verdict when the heavy model cannot answer in the time left", async () => {
    const { outcome, calls } = await run({ workerVerdict: { accept: false, judgeMs: 5 }, floorMs: 9_950 });
    expect(calls).toEqual(["route", "generate:l"]);
    expect(outcome).toMatchObject({ ok: true, route: "light", escalationSkipped: true, judge: { accept: false } });
  });

  it("asks the judge when the light image came without a verdict (a worker that cannot judge, or an older one)", async () => {
    const accepted = await run({ judgeAccepts: true });
    expect(accepted.calls).toEqual(["route", "generate:l", "judge"]);
    expect(accepted.outcome).toMatchObject({ ok: true, route: "light", judge: { score: 0.9 } });
    const rejected = await run({ judgeAccepts: false });
    expect(rejected.calls).toEqual(["route", "generate:l", "judge", "generate:h"]);
  });
});
