/** The live router with the learned scorer, over a real nats-server: each prompt scored under the plan's pair. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LearnedDifficultyScorer } from "../../actors/routing/learned-scorer.ts";
import { loadProfiles } from "../../services/files/profiles.ts";
import { routerScoring } from "../../services/files/router-scoring.ts";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem({ workers: 2, scorer: "learned" });
});
afterAll(async () => {
  await t?.stop();
});

describe("router with the learned scorer", () => {
  it("reports the learned score under the plan's pair: the model's for a new prompt, the cross-fitted one for a reference prompt", async () => {
    const profiles = loadProfiles();
    const expected = routerScoring("learned", profiles).scorer as LearnedDifficultyScorer;
    const analyzerOnly = routerScoring("analyzer", profiles).scorer;
    for (const prompt of ["two astronauts playing chess on the moon under a purple sky", profiles.reference.prompts[3]]) {
      const reply = await t.client.generate({ prompt, deadlineMs: 20_000 });
      const plan = t.system.manager!.plans.current!;
      expect(reply.planEpoch).toBe(plan.epoch);
      const pair = plan.pair;
      expect(expected.usesModel(pair)).toBe(true);
      expect(reply.difficulty).toBeCloseTo(expected.score(prompt, pair), 9);
      // Not the analyzer's score, raw or z-normalised: the learned model decided.
      expect(reply.difficulty).not.toBeCloseTo(analyzerOnly.score(prompt), 3);
      expect(reply.difficulty).not.toBeCloseTo(expected.score(prompt), 3);
    }
  });
});
