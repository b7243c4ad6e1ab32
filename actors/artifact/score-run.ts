/**
 * A run's figures under a fidelity: pooled by arrival (our scoring), or, with the artifact's
 * `scoring` switch, from the controller's per-second rows as the artifact's plot computes them;
 * the pooled figures stay alongside for comparison.
 */
import type { ProfileSet } from "../profile/profile-set.ts";
import { scoreRun, type RunScore, type ScoreInput } from "../sim/scoring.ts";
import type { LedgerRow } from "./ledger.ts";
import { has, type Fidelity } from "./mechanisms.ts";
import { fidSourceOf, PLOT_ROWS, scoreArtifactRows, type ArtifactFidTables, type ArtifactScore } from "./scoring.ts";

/** The FID tables the artifact's parser holds, from the profiles (by reference id). */
export function artifactFidTables(profiles: ProfileSet): ArtifactFidTables {
  const single: Record<number, number> = {};
  for (const m of profiles.models) if (m.referenceId !== undefined && m.fidAlone !== undefined) single[m.referenceId] = m.fidAlone;
  const cascade: Record<string, number[]> = {};
  const rows = [...profiles.reference.fidVsHeavyShare].sort((a, b) => a.heavyShare - b.heavyShare);
  for (const r of rows) (cascade[`${r.lightId},${r.heavyId}`] ??= []).push(r.fid);
  return { single, cascade };
}

/** A run score, with the artifact's figures when they are the headline. */
export type FidelityScore = RunScore & {
  /** The fidelity's name. */
  fidelity: string;
  /** How the headline figures were computed. */
  scoring: "pooled" | "artifact";
  /** The pooled figures, when the headline is the artifact's. */
  pooled?: { sloViolationRatio: number; fid: number };
  /** The artifact's windowed scoring detail (rows used, offset, per-window series). */
  artifact?: Omit<ArtifactScore, "points">;
};

/** Scores a run under `fidelity`; `rows` are the controller's per-second rows of the run. */
export function scoreWithFidelity(
  input: ScoreInput & { fidelity: Fidelity; rows: readonly LedgerRow[]; profiles: ProfileSet },
): FidelityScore {
  const pooled = scoreRun(input);
  if (!has(input.fidelity, "scoring")) return { ...pooled, fidelity: input.fidelity.name, scoring: "pooled" };
  const art = scoreArtifactRows(input.rows, fidSourceOf(input.policy), artifactFidTables(input.profiles), PLOT_ROWS);
  const { points, ...detail } = art;
  const demandAt = (ms: number) => pooled.windows.find((w) => w.startMs <= ms && ms < w.startMs + 5_000)?.demandQps ?? 0;
  return {
    ...pooled,
    sloViolationRatio: art.sloViolationRatio,
    fid: art.fid,
    windows: points.map((p) => ({
      startMs: p.startMs,
      demandQps: demandAt(p.startMs),
      offered: 0,
      fid: p.fid,
      sloViolationRatio: p.sloViolationRatio,
    })),
    fidelity: input.fidelity.name,
    scoring: "artifact",
    pooled: { sloViolationRatio: pooled.sloViolationRatio, fid: pooled.fid },
    artifact: detail,
  };
}
