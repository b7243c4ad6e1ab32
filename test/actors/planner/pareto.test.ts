import { describe, expect, it } from "vitest";
import type { GridRow } from "../../../actors/profile/reference.ts";
import { compareFront, paretoCsv, paretoFront } from "../../../actors/planner/pareto.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const row = (r: number, d: number, latencyS: number, fid: number): GridRow => ({
  lightId: 0,
  heavyId: 1,
  routerThreshold: r,
  discThreshold: d,
  heavyShare: r + (1 - r) * d,
  latencyS,
  fid,
});

describe("paretoFront", () => {
  it("drops dominated rows and keeps cost ties under strict dominance", () => {
    const grid = [row(0, 0, 1, 30), row(0, 0.1, 2, 28), row(0.1, 0, 2, 29), row(0.2, 0, 3, 28.5), row(0.3, 0, 4, 27)];
    expect(paretoFront(grid, { cost: "latency", scope: "global" }).map((r) => r.fid)).toEqual([27, 28, 30]);
    expect(paretoFront(grid, { cost: "latency", scope: "global", dominance: "strict" }).map((r) => r.fid)).toEqual([27, 28, 29, 30]);
  });

  it("reproduces 48 of the 49 reference pareto_hybrid rows from the 726-row grid", () => {
    const { configGrid, paretoHybrid } = loadProfiles().reference;
    expect(configGrid).toHaveLength(726);
    const c = compareFront(configGrid, paretoHybrid, { cost: "latency", scope: "global", dominance: "strict" });
    expect(c.matched.length).toBe(48);
    expect(c.onlyReference).toHaveLength(1);
    expect(paretoCsv(c.matched).split("\n")[0]).toBe("light_model,heavy_model,router_thres,conf_thres,heavy_share,fid");
  });
});
