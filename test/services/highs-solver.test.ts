import { afterEach, describe, expect, it } from "vitest";
import { createHighsSolver, type HighsSolver } from "../../services/solver/highs-solver.ts";

const knapsack = `Maximize
 obj: 30 chairs + 50 tables
Subject To
 carpentry: chairs + 2 tables <= 40
 finishing: 2 chairs + tables <= 50
Bounds
 chairs >= 0
 tables >= 0
Generals
 chairs tables
End
`;

let solver: HighsSolver | undefined;
afterEach(async () => {
  await solver?.close();
  solver = undefined;
});

describe("createHighsSolver (worker thread)", () => {
  it("solves a MILP off the main thread", async () => {
    solver = createHighsSolver();
    const sol = await solver.solve(knapsack);
    expect(sol.status).toBe("Optimal");
    expect(sol.objective).toBeCloseTo(1100, 6);
    expect(Math.round(sol.columns.chairs)).toBe(20);
    expect(Math.round(sol.columns.tables)).toBe(10);
  });

  it("reports infeasibility and parse errors as statuses", async () => {
    solver = createHighsSolver();
    const infeasible = await solver.solve("Minimize\n obj: x\nSubject To\n c1: x >= 2\n c2: x <= 1\nEnd\n");
    expect(infeasible.status).toBe("Infeasible");
    const garbage = await solver.solve("this is not an LP");
    expect(garbage.status).not.toBe("Optimal");
    expect(Object.keys(garbage.columns)).toHaveLength(0);
  });

  it("times out a solve, replaces the worker and keeps serving", async () => {
    solver = createHighsSolver({ graceMs: 0 });
    const timedOut = await solver.solve(knapsack, { timeLimitS: 0 });
    expect(timedOut.status).toBe("Timeout");
    const after = await solver.solve(knapsack);
    expect(after.status).toBe("Optimal");
  });

  it("queues concurrent solves and resolves pending ones on close", async () => {
    solver = createHighsSolver();
    const all = await Promise.all([solver.solve(knapsack), solver.solve(knapsack), solver.solve(knapsack)]);
    expect(all.map((s) => s.status)).toEqual(["Optimal", "Optimal", "Optimal"]);
    const pending = solver.solve(knapsack);
    await solver.close();
    expect((await pending).status).toBe("Error");
    expect((await solver.solve(knapsack)).status).toBe("Error");
  });
});
