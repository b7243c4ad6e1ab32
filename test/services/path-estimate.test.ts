/**
 * hadis-plus's path estimate in the router: the generations it waits on per model (times the
 * routers the plan counts), the plan's workers and batch, the fastest recent generation, and the
 * fastest recent verdict. Unit level, on a router's pending work.
 */
import { describe, expect, it } from "vitest";
import { PendingWork } from "../../services/router/pending.ts";
import { pathEstimator } from "../../services/router/path-estimate.ts";
import { GenerationFloor } from "../../actors/routing/generation-floor.ts";
import { UNSERVED_MS } from "../../actors/routing/deadline-aware.ts";
import type { Plan } from "../../contracts/messages.ts";
import { waiting } from "../helpers/pending.ts";

const plan = (routers: number): Plan =>
  ({
    pair: { light: "m", heavy: "h" },
    models: { m: { workers: 2, batchSize: 2 }, h: { workers: 1, batchSize: 1 } },
    admission: { routers, headroom: 0.8 },
  }) as unknown as Plan;

describe("the router's path estimate", () => {
  it("counts the rounds of batches waiting ahead of a generation, for every router the plan counts", () => {
    const pending = new PendingWork();
    const floor = new GenerationFloor();
    const paths = pathEstimator(pending, floor);
    floor.observe("m", 300);
    floor.observe("m", 250);
    // Nothing queued (up to a round running): one batch of the fastest recent generation.
    expect(paths.view(plan(1)).stageMs("m")).toBe(250);
    for (let i = 0; i < 4; i++) waiting(pending, `running${i}`, 100 + i);
    expect(paths.view(plan(1)).stageMs("m")).toBe(250);
    expect(paths.view(plan(1)).hasRoom("m")).toBe(true);
    for (const e of pending.waiting()) pending.drop(e);
    for (let i = 0; i < 9; i++) waiting(pending, `r${i}`, i + 1);
    // 9 waiting on 2 workers × batch 2: 4 running, 5 queued: one round ahead, then its own.
    expect(paths.view(plan(1)).stageMs("m")).toBe(2 * 250);
    expect(paths.view(plan(1)).hasRoom("m")).toBe(false);
    // Two routers: this one sees half of what waits (18: 4 running, 14 queued, 3 rounds ahead).
    expect(paths.view(plan(2)).stageMs("m")).toBe(4 * 250);
    // A model no worker serves: never in time (finite once admitted).
    expect(paths.view({ ...plan(1), models: {} }).stageMs("m")).toBe(Number.POSITIVE_INFINITY);
    expect(Math.min(paths.view({ ...plan(1), models: {} }).stageMs("m"), UNSERVED_MS)).toBe(UNSERVED_MS);
  });

  it("learns the judge's time from the verdicts it sees, 0 before any", () => {
    const paths = pathEstimator(new PendingWork(), new GenerationFloor());
    expect(paths.view(plan(1)).judgeMs).toBe(0);
    paths.observeJudge(12);
    paths.observeJudge(4);
    expect(paths.view(plan(1)).judgeMs).toBe(4);
  });
});
