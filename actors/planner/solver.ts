/**
 * The solver seam: the planner hands CPLEX LP text to a `SolveFn` and reads primal values back.
 * The HiGHS worker-thread implementation lives in `services/solver/highs-solver.ts`.
 */

/** Options of one MILP solve. */
export interface SolveOptions {
  /** Wall-clock limit for the solve, seconds. */
  timeLimitS?: number;
  /** Relative MIP gap at which to stop (0 = prove optimality). */
  mipRelGap?: number;
  /** Absolute MIP gap at which to stop, objective units. */
  mipAbsGap?: number;
  /** Extra HiGHS options passed through verbatim (names as in HiGHS). */
  highs?: Record<string, string | number | boolean>;
}

/** Outcome of one solve; failures are statuses, never exceptions. */
export interface MilpSolution {
  /** HiGHS model status ("Optimal", "Infeasible", "Time limit reached", …) or "Error" / "Timeout". */
  status: string;
  /** Objective value when a solution exists, else null. */
  objective: number | null;
  /** Primal value per column name (empty when there is no solution). */
  columns: Record<string, number>;
  /** Time spent solving, ms (measured where the solve ran). */
  solveMs: number;
  /** Error text for "Error" / "Timeout". */
  error?: string;
}

/** Solves CPLEX LP text; must resolve (not reject) on solver errors. */
export type SolveFn = (lp: string, opts?: SolveOptions) => Promise<MilpSolution>;

/**
 * Whether the solution carries usable primal values. A limit reached before any feasible point
 * still fills the columns (highs-js reads whatever the solver holds), but has no finite objective.
 */
export function hasSolution(sol: MilpSolution): boolean {
  return (
    (sol.status === "Optimal" || sol.status === "Time limit reached" || sol.status === "Iteration limit reached") &&
    sol.objective !== null &&
    Number.isFinite(sol.objective) &&
    Object.keys(sol.columns).length > 0
  );
}
