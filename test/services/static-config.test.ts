import { describe, expect, it } from "vitest";
import { DEFAULT_STATIC, staticConfigFor } from "../../services/resource-manager/policies.ts";

describe("--static-config", () => {
  it("takes the fields it names over the default; another point of the table has no expected FID unless given", () => {
    expect(staticConfigFor("static", '{"lightBatchSize":4}')).toEqual({ ...DEFAULT_STATIC, lightBatchSize: 4 });
    const other = staticConfigFor("static", '{"light":"sdxl-lightning","heavy":"sd35-large","routerThreshold":0.3,"discThreshold":0.1}')!;
    expect(other).toMatchObject({
      light: "sdxl-lightning",
      heavy: "sd35-large",
      routerThreshold: 0.3,
      discThreshold: 0.1,
      lightBatchSize: 2,
    });
    expect(other.expectedFid).toBeUndefined();
    expect(staticConfigFor("static", '{"light":"sdxl-lightning","expectedFid":21.5}')!.expectedFid).toBe(21.5);
    expect(staticConfigFor("static", undefined)).toBeUndefined();
  });

  it("refuses what it would otherwise ignore or take wrongly, naming the flag", () => {
    expect(() => staticConfigFor("static", '{"routerShare":0.3}')).toThrow(/--static-config.*routerShare/);
    expect(() => staticConfigFor("static", '{"routerThreshold":"0.3"}')).toThrow(/--static-config: routerThreshold/);
    expect(() => staticConfigFor("static", '{"discThreshold":3}')).toThrow(/discThreshold/);
    expect(() => staticConfigFor("static", '{"lightBatchSize":2.5}')).toThrow(/lightBatchSize/);
    expect(() => staticConfigFor("static", "{light:")).toThrow(/--static-config is not JSON/);
    expect(() => staticConfigFor("static", "[1]")).toThrow(/--static-config/);
    expect(() => staticConfigFor("hadis", '{"light":"sdxl-lightning"}')).toThrow(/applies to --policy static/);
  });
});

describe("createPolicy", () => {
  it("refuses at start a baseline whose models the pool lacks (it failed every tick)", async () => {
    const { createPolicy } = await import("../../services/resource-manager/policies.ts");
    const { loadProfiles } = await import("../../services/files/profiles.ts");
    const profiles = loadProfiles();
    expect(() => createPolicy("clipper-heavy", profiles)).not.toThrow();
    const lacking = { ...profiles, byName: new Map([...profiles.byName].filter(([name]) => name !== "sd35-large")) };
    expect(() => createPolicy("clipper-heavy", lacking)).toThrow(/clipper-heavy needs model "sd35-large"/);
    expect(() => createPolicy("diffserve", lacking)).toThrow(/needs model "sd35-large"/);
    expect(() => createPolicy("hadis", lacking)).not.toThrow();
  });
});
