/** Finds reference prompts that take each route under a plan, computed from the profiles. */
import { loadProfiles } from "../../services/files/profiles.ts";
import { FixedPercentileThreshold, ReferenceFeatureScorer } from "../../actors/routing/difficulty.ts";
import { ProfileJudge } from "../../actors/judge/profile-judge.ts";

/** One prompt per route for a (light, router share, disc share) configuration. */
export function promptsByRoute(light: string, routerShare: number, discShare: number) {
  const profiles = loadProfiles();
  const scorer = new ReferenceFeatureScorer(profiles);
  const threshold = new FixedPercentileThreshold(scorer.referenceScores);
  const judge = new ProfileJudge(profiles, { latencyMs: 0, sleep: async () => {} });
  const cut = judge.thresholdFor(light, discShare);
  const lightScores = profiles.reference.scores.get(light)!;
  const found: { light?: string; heavy?: string; escalated?: string } = {};
  profiles.reference.prompts.forEach((prompt, i) => {
    if (profiles.reference.promptIndex.get(prompt.trim()) !== i) return;
    // Only prompts whose route no request id's tie-break can change.
    const score = scorer.referenceScores[i];
    const alwaysHard = threshold.isHard(score, routerShare, 0);
    if (alwaysHard !== threshold.isHard(score, routerShare, 1 - 2 ** -32)) return;
    if (alwaysHard) found.heavy ??= prompt;
    else if (lightScores[i] >= cut) found.light ??= prompt;
    else found.escalated ??= prompt;
  });
  return found as { light: string; heavy: string; escalated: string };
}
