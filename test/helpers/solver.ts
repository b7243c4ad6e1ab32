/** The real HiGHS solver for a test file's planner tests, inline (no worker thread). */
import { afterAll, beforeAll } from "vitest";
import type { SolveFn } from "../../actors/planner/solver.ts";
import { createInlineHighsSolver, type HighsSolver } from "../../services/solver/highs-solver.ts";

/** Made before the file's tests and closed after them; the returned `solve` calls it. */
export function inlineSolverForFile(): SolveFn {
  let solver: HighsSolver;
  beforeAll(async () => {
    solver = await createInlineHighsSolver();
  });
  afterAll(() => solver.close());
  return (lp, options) => solver.solve(lp, options);
}
