/**
 * What a start makes of the state an earlier run left: the plan in the bucket (resumed when it was
 * made for the same time scale, set aside for a fresh plan when not, saying which), and the
 * nats-server a `hadis start` killed with SIGKILL leaves running (the next start on that data dir
 * stops it and says so; one on another data dir names it).
 */
import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startNatsServer } from "../../services/nats/server.ts";
import { connectNats } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import type { Logger } from "../../services/telemetry/log.ts";
import { startTestServices } from "../helpers/system.ts";
import { spawnHadis, stopSpawned, waitFor } from "../helpers/processes.ts";

/**
 * Whether a process runs: not gone and not a zombie. (A stopped leftover's parent is whatever
 * adopted it when its start was killed; pid 1 of a container may reap it late, and `kill -0`
 * succeeds on a zombie.)
 */
function alive(pid: string): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** A log that keeps its events and their fields. */
function recordingLog(): Logger & { events: { event: string; fields: Record<string, unknown> }[] } {
  const events: { event: string; fields: Record<string, unknown> }[] = [];
  const at = (event: string, fields: Record<string, unknown> = {}) => void events.push({ event, fields });
  return { events, debug: at, info: at, warn: at, error: at };
}

describe("a restart", () => {
  it("at another time scale plans afresh under the next epoch, saying why, and no worker is told to change its flag; at the same one it resumes", async () => {
    const server = await startNatsServer();
    try {
      const first = await startTestServices(server.url, { timeScale: 0.01, workers: 2 });
      const firstEpoch = first.manager!.plans.current!.epoch;
      expect(first.manager!.resumed).toEqual({ kind: "none" });
      await first.stop(1_000);

      const log = recordingLog();
      const second = await startTestServices(server.url, { timeScale: 0.02, workers: 2, log });
      const nc = await connectNats(server.url, "restart-test");
      const client = new HadisClient(nc);
      try {
        expect(second.manager!.resumed).toEqual({
          kind: "fresh",
          storedEpoch: firstEpoch,
          why: `epoch ${firstEpoch} was made for time scale 0.01, not 0.02`,
        });
        const plan = second.manager!.plans.current!;
        expect(plan.timeScale).toBe(0.02);
        expect(plan.epoch).toBeGreaterThan(firstEpoch);
        expect((await client.generate({ prompt: "a red bicycle", deadlineMs: 20_000 })).planEpoch).toBeGreaterThan(firstEpoch);
        expect(log.events.filter((e) => e.event === "worker.time_scale_differs")).toEqual([]);
        expect(log.events.find((e) => e.event === "manager.fresh_plan")?.fields).toMatchObject({ storedEpoch: firstEpoch });
      } finally {
        await second.stop(1_000);
      }
      const lastEpoch = second.manager!.plans.current!.epoch;

      const third = await startTestServices(server.url, { timeScale: 0.02, workers: 2 });
      try {
        expect(third.manager!.resumed).toMatchObject({ kind: "resumed", epoch: lastEpoch, timeScale: 0.02, policy: "static" });
      } finally {
        await third.stop(1_000);
        await nc.close();
      }
    } finally {
      await server.stop();
    }
  }, 60_000);

  it("of `hadis start` after one killed with SIGKILL stops the nats-server it left, and serves; a start on another data dir names that leftover", async () => {
    const port = await freePort();
    const dataDir = mkdtempSync(join(tmpdir(), "hadis-killed-"));
    const common = ["--port", String(port), "--workers", "2", "--time-scale", "0.01", "--no-dashboard"];
    let leftover = "";
    try {
      const killed = spawnHadis(["start", "--data-dir", dataDir, ...common], {}, { group: true });
      // (Its first plan is stored by the time its workers have loaded the plan's models.)
      await waitFor(() => killed.output().includes("HADIS models loaded"), 40_000, "first start's models loaded");
      leftover = spawnSync("pgrep", ["-f", `nats-server.*${dataDir}`], { encoding: "utf8" }).stdout.trim();
      expect(leftover).toMatch(/^\d+$/);
      killed.child.kill("SIGKILL"); // the start only: its nats-server runs in a session of its own
      await killed.exited;
      expect(alive(leftover)).toBe(true); // left running

      // Another data dir on the same port: refused, naming the leftover and what to do.
      const elsewhere = spawnHadis(["start", "--data-dir", `${dataDir}-2`, ...common]);
      expect(await elsewhere.exited).toBe(2);
      expect(elsewhere.output()).toContain(
        `port ${port} on 127.0.0.1 is already in use by nats-server pid ${leftover}, left running by an earlier start on data dir ${dataDir} that was killed`,
      );

      // The same data dir, at another time scale (as `npm start -- --time-scale 0.02`): the leftover is
      // stopped, this start serves on the port, and says it planned afresh; no worker is told to
      // change the time scale it was given.
      const again = spawnHadis(["start", "--data-dir", dataDir, ...common, "--time-scale", "0.02"], {}, { group: true });
      await waitFor(
        () => again.output().includes("HADIS models loaded") || again.child.exitCode !== null,
        40_000,
        "second start's models loaded",
      );
      expect(again.output()).toContain(
        `stopped the nats-server (pid ${leftover}) an earlier start left running on this data dir when it was killed`,
      );
      expect(again.output()).toMatch(/state from .*: a fresh plan: the stored epoch \d+ was made for time scale 0\.01, not 0\.02\n/);
      expect(again.output()).not.toContain("time_scale_differs");
      expect(alive(leftover)).toBe(false);
      const nc = await connectNats(`nats://127.0.0.1:${port}`, "after-leftover");
      expect((await new HadisClient(nc).generate({ prompt: "a red bicycle", deadlineMs: 20_000 })).image.byteLength).toBeGreaterThan(0);
      await nc.close();
      process.kill(-again.child.pid!, "SIGINT");
      expect(await again.exited).toBe(0);
      expect(spawnSync("pgrep", ["-f", dataDir], { encoding: "utf8" }).stdout.trim()).toBe("");
    } finally {
      await stopSpawned();
      // A failed run must not leave the server it made a leftover of: killed by its pid, if it still runs this data dir.
      if (leftover && spawnSync("cat", [`/proc/${leftover}/cmdline`], { encoding: "utf8" }).stdout.includes(dataDir))
        process.kill(Number(leftover), "SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(`${dataDir}-2`, { recursive: true, force: true });
    }
  }, 120_000);
});
