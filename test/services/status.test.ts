/**
 * `hadis status` against a real nats-server: nothing running (it says so), then a running system
 * (router, resource manager, judge, four profile workers): the plan in force and every worker;
 * and the command itself, as the observer role of ops/nats/accounts.conf on a secured server.
 */
import { afterAll, describe, expect, it, vi } from "vitest";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { formatStatus, readStatus, statusCommand } from "../../services/cli/status.ts";
import { toolCredentials } from "../../services/cli/credentials.ts";
import { generateCommand } from "../../services/cli/generate.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { roleEnv, startSecureServer } from "../helpers/secure.ts";

const t = useNatsServer("status-test");
let system: RunningSystem | undefined;

afterAll(async () => {
  await system?.stop(1_000);
});

describe("hadis status", () => {
  it("marks a worker swapping to its planned model, one left out of the plan, one whose load failed, one whose batches fail and one that takes smaller batches", () => {
    const beat = (workerId: string, model: string | null, state: string, extra = {}) =>
      ({
        v: 1,
        workerId,
        backend: "profile",
        model,
        state,
        batchSize: 1,
        inFlight: 0,
        servedTotal: 3,
        swapsTotal: 0,
        planEpoch: 7,
        sentAtMs: 0,
        ...extra,
      }) as never;
    const text = formatStatus({
      manager: true,
      demandQps: 2,
      plan: {
        v: 1,
        epoch: 7,
        policy: "hadis",
        issuedAtMs: 0,
        sloMs: 6_000,
        timeScale: 0.1,
        pair: { light: "a", heavy: "b" },
        routerThreshold: 0.2,
        discThreshold: 0.1,
        heavyShare: 0.3,
        models: { a: { workers: 1, batchSize: 2 }, b: { workers: 1, batchSize: 1 } },
        assignment: { w1: "a", w2: "b" },
        reason: "test",
      },
      workers: [
        beat("w1", "a", "serving"),
        beat("w2", null, "loading"),
        beat("w3", null, "failed", { failedModel: "c", lastError: "load c: missing model file" }),
        beat("w4", "a", "failed", { failedModel: "a", lastError: 'output "sample" has 4 channels, expected 3' }),
        beat("w5", "a", "serving", { batchCap: 1 }),
      ],
      routers: ["r-1"],
      serving: true,
      notServing: [],
    });
    expect(text).toMatch(/^serving: 1 router answered, 5 workers heard\n/);
    expect(text).toContain("workers heard (5): 2 serving, 1 loading, 2 failed");
    expect(text).toContain("; demand estimate 2 qps"); // the planner's average (the dashboard's 10-s rate differs)
    expect(text).toMatch(/w5 .*serving .*batch 1 .*batches capped at 1 \(a bigger one ran only in parts\)\n/);
    expect(text).toMatch(/w4 .*failed .*batches of a failing\n/);
    expect(text).toMatch(/w1 +a +serving +batch 1 +served 3 +epoch 7\n/);
    expect(text).toMatch(/w2 .*loading .*plan: b\n/);
    expect(text).toMatch(/w3 .*failed .*not in the plan \(benched, or joined since\); failed to load c\n/);
    expect(text).not.toContain("mechanisms in force");
  });

  it("names the artifact's mechanisms a plan puts in force", () => {
    const plan = {
      v: 1 as const,
      epoch: 3,
      policy: "hadis",
      issuedAtMs: 0,
      sloMs: 6_000,
      timeScale: 0.1,
      pair: { light: "a", heavy: "a" },
      routerThreshold: 0,
      discThreshold: 0,
      heavyShare: 0,
      models: { a: { workers: 1, batchSize: 1 } },
      assignment: { w1: "a" },
      reason: "artifact milp",
      routerMode: "workers" as const,
      mechanisms: ["dispatch", "drops"],
    };
    const text = formatStatus({ manager: true, demandQps: null, plan, workers: [], routers: [], serving: false, notServing: ["x"] });
    expect(text).toContain("  the paper artifact's mechanisms in force: dispatch, drops\n");
  });

  it("says when no resource manager answers and no worker beats", async () => {
    const status = await readStatus(t.nc, buildSubjects(), 300, 300);
    expect(status).toEqual({
      manager: false,
      plan: null,
      demandQps: null,
      workers: [],
      routers: [],
      serving: false,
      notServing: ["no router answered $SRV.PING within 300 ms", "no worker heard within 300 ms"],
    });
    const text = formatStatus(status);
    expect(text).toMatch(/^not serving: no router answered \$SRV\.PING within 300 ms; no worker heard within 300 ms\n/);
    expect(text).toContain("no resource manager answered");
    expect(text).toContain("workers heard (0)");
  });

  it("shows the plan in force and every worker of a running system", async () => {
    system = await startSystem({
      natsUrl: t.server.url,
      workers: 4,
      workerIdPrefix: "gpu",
      timeScale: 0.01,
      workQueue: { storage: "memory" },
      log: createLogger("test", "error"),
    });
    const plans = system.manager!.plans;
    for (let i = 0; i < 200 && !(plans.current && system.workers!.agents.every((a) => a.status("x").state === "serving")); i++)
      await new Promise((r) => setTimeout(r, 50));
    const status = await readStatus(t.nc, buildSubjects(), 1_300);
    expect(status.manager).toBe(true);
    expect(status.plan?.epoch).toBe(plans.current!.epoch);
    expect(status.demandQps).not.toBeNull();
    expect(status.workers.map((w) => w.workerId)).toEqual(["gpu-00", "gpu-01", "gpu-02", "gpu-03"]);
    expect(status.routers).toEqual([system.routers[0].routerId]);
    expect(status.serving).toBe(true);
    for (const w of status.workers) expect(w.model).toBe(status.plan!.assignment[w.workerId]);
    const text = formatStatus(status);
    expect(text).toContain(`plan epoch ${status.plan!.epoch} (hadis-plus)`); // the default policy
    expect(text).toContain("workers heard (4): 4 serving");
    expect(text).toMatch(/^serving: 1 router answered, 4 workers heard\n/);
    for (const [model, a] of Object.entries(status.plan!.models)) expect(text).toContain(`${model}: ${a.workers} worker`);
    expect(text).not.toContain("plan: "); // every worker holds its planned model
  }, 30_000);
});

describe("hadis status as the observer role", () => {
  it("reads the plan and the workers with the observer's user and inbox, prints JSON, and exits 2 without a manager", async () => {
    const secure = await startSecureServer();
    const running = await startSystem({
      natsUrl: secure.server.url,
      credentials: (kind) => secure.serviceCredentials(kind),
      workers: 2,
      workerIdPrefix: "obs",
      timeScale: 0.01,
      workQueue: { storage: "memory" },
      log: createLogger("test", "error"),
    });
    let stopped = false;
    const out: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => (out.push(String(chunk)), true));
    const env = {
      [roleEnv("observer").user]: secure.credentials.observer.user,
      [roleEnv("observer").pass]: secure.credentials.observer.pass,
    };
    try {
      for (let i = 0; i < 200 && !running.manager!.plans.current; i++) await new Promise((r) => setTimeout(r, 50));
      await statusCommand({ nats: secure.server.url, json: true, listenMs: 1_300 }, env);
      const status = JSON.parse(out.join(""));
      expect(status.manager).toBe(true);
      expect(status.plan.epoch).toBeGreaterThanOrEqual(1);
      expect(status.workers.map((w: { workerId: string }) => w.workerId)).toEqual(["obs-00", "obs-01"]);
      expect(status.routers).toHaveLength(1); // pinged under the observer's own inbox
      expect(status.serving).toBe(true);
      expect(process.exitCode ?? 0).toBe(0);
      // hadis generate as the client role (HADIS_CLIENT_NATS_*): served.
      out.length = 0;
      const clientEnv = {
        [roleEnv("client").user]: secure.credentials.client.user,
        [roleEnv("client").pass]: secure.credentials.client.pass,
      };
      await generateCommand("a red bicycle", { nats: secure.server.url, json: true }, clientEnv);
      expect(JSON.parse(out.join("")).route).toMatch(/^(light|heavy)$/);
      // Without credentials the secured server refuses it, saying where: on stderr, or as one JSON error with --json; exit 1.
      const err: string[] = [];
      const writeErr = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => (err.push(String(chunk)), true));
      try {
        await generateCommand("a red bicycle", { nats: secure.server.url }, {});
        expect(err.join("")).toMatch(/cannot reach NATS at .*Authorization Violation/i);
        expect(process.exitCode).toBe(1);
        process.exitCode = 0;
        out.length = 0;
        await generateCommand("a red bicycle", { nats: secure.server.url, json: true }, {});
        expect(JSON.parse(out.join(""))).toMatchObject({
          error: { code: "client_error", retryable: false, message: expect.stringMatching(/Authorization Violation/) },
        });
        expect(process.exitCode).toBe(1);
        process.exitCode = 0;
        // An --out that cannot be written is refused before anything is sent (no image made for nothing).
        const received = running.routers[0].stats().received;
        out.length = 0;
        await generateCommand("a red bicycle", { nats: secure.server.url, json: true, out: "/no/such/folder/a.png" }, clientEnv);
        expect(JSON.parse(out.join(""))).toMatchObject({
          error: {
            code: "client_error",
            message: expect.stringMatching(/cannot write --out .*no folder \/no\/such\/folder; nothing was sent/),
          },
        });
        expect(running.routers[0].stats().received).toBe(received);
        expect(process.exitCode).toBe(1);
        process.exitCode = 0;
      } finally {
        writeErr.mockRestore();
      }
      // Without the manager: said, and exit code 2.
      await running.stop(1_000);
      stopped = true;
      out.length = 0;
      await statusCommand({ nats: secure.server.url, listenMs: 300 }, env);
      expect(out.join("")).toContain("no resource manager answered");
      expect(process.exitCode).toBe(2);
      expect(secure.violations()).toEqual([]);
    } finally {
      write.mockRestore();
      process.exitCode = 0;
      // The server is stopped whatever the system's stop does: a failed test must not leave it running.
      if (!stopped) await running.stop(1_000).catch(() => undefined);
      await secure.server.stop();
    }
  }, 40_000);

  it("refuses half a set of credentials, naming the missing one", () => {
    expect(() => toolCredentials({ HADIS_OBSERVER_NATS_USER: "o" }, "observer")).toThrow(/HADIS_OBSERVER_NATS_PASS is not set/);
    expect(toolCredentials({ HADIS_NATS_USER: "u", HADIS_NATS_PASS: "p" }, "observer")).toEqual({ user: "u", pass: "p" });
    expect(toolCredentials({ HADIS_OBSERVER_NATS_USER: "o", HADIS_OBSERVER_NATS_PASS: "p" }, "observer")).toEqual({
      user: "o",
      pass: "p",
      inboxPrefix: "_INBOX_observer",
    });
    expect(
      toolCredentials({ HADIS_CLIENT_NATS_USER: "c", HADIS_CLIENT_NATS_PASS: "p", HADIS_NATS_USER: "u", HADIS_NATS_PASS: "q" }, "client"),
    ).toEqual({ user: "c", pass: "p" });
    expect(() => toolCredentials({ HADIS_CLIENT_NATS_PASS: "p" }, "client")).toThrow(/HADIS_CLIENT_NATS_USER is not set/);
    expect(toolCredentials({}, "client")).toBeUndefined();
  });
});
