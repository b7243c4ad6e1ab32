import { describe, expect, it } from "vitest";
import { subjects, assertToken } from "../../contracts/subjects.ts";

describe("subjects", () => {
  const s = subjects();
  it("builds every subject under the hadis prefix", () => {
    expect(s.generate).toBe("hadis.generate");
    expect(s.judge).toBe("hadis.judge");
    expect(s.work("sd35-large")).toBe("hadis.work.sd35-large");
    expect(s.workAll).toBe("hadis.work.>");
    expect(s.results("r-abc")).toBe("hadis.result.r-abc");
    expect(s.workerHeartbeat("w-1")).toBe("hadis.heartbeat.worker.w-1");
    expect(s.workerHeartbeatAll).toBe("hadis.heartbeat.worker.*");
    expect(s.routerStats("r1")).toBe("hadis.stats.router.r1");
    expect(s.routerStatsAll).toBe("hadis.stats.router.*");
    expect(s.planBroadcast).toBe("hadis.plan");
    expect(s.workerControl("w")).toBe("hadis.control.worker.w");
    expect(s.telemetrySpans).toBe("hadis.telemetry.spans");
    expect(s.managerPlan).toBe("hadis.manager.plan");
    expect(s.workGivenUp).toBe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.HADIS_WORK.*");
    expect(s.names).toMatchObject({ workStream: "HADIS_WORK", planBucket: "hadis-plan", planKey: "current" });
    expect(s.names.workConsumer("sdxl-lightning")).toBe("work-sdxl-lightning");
    expect(s.jobsSubmit).toBe("hadis.jobs.submit");
    expect(s.jobEvent("j1", "done")).toBe("hadis.jobs.j1.done");
    expect(s.jobEvents("j1")).toBe("hadis.jobs.j1.*");
    expect(s.jobEventsAll).toBe("hadis.jobs.*.*");
    expect(s.names.jobStream).toBe("HADIS_JOBS");
  });

  it("the jobs stream keeps job events but not submissions (JetStream would answer those itself)", () => {
    const matches = (filter: string, subject: string) => {
      const f = filter.split(".");
      const t = subject.split(".");
      return f.length === t.length && f.every((tok, i) => tok === "*" || tok === t[i]);
    };
    expect(matches(s.jobEventsAll, s.jobEvent("abc", "queued"))).toBe(true);
    expect(matches(s.jobEventsAll, s.jobsSubmit)).toBe(false);
    expect(() => s.jobEvents("a.b")).toThrow(/not a valid subject token/);
  });

  it("a second prefix gives a disjoint set", () => {
    const t = subjects("exp-2");
    expect(t.generate).toBe("exp-2.generate");
    expect(t.names.workStream).toBe("EXP_2_WORK");
    expect(t.workGivenUp).toBe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.EXP_2_WORK.*");
    expect(t.work("m")).toBe("exp-2.work.m");
    expect(t.names.jobStream).toBe("EXP_2_JOBS");
  });

  it("refuses tokens that would widen or split a subject", () => {
    for (const bad of ["sd3.5", "a b", "*", ">", "", "x.>"]) expect(() => s.work(bad)).toThrow(/not a valid subject token/);
    expect(() => assertToken("ok_1-A", "t")).not.toThrow();
    expect(() => subjects("bad.prefix")).toThrow();
  });
});
