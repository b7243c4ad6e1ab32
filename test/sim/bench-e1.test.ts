/** `hadis bench e1` in its default mode (`--embedded`: a fresh server and system per policy) and against a running system, on a few arrivals. */
import { describe, expect, it, vi } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { benchE1Command } from "../../services/cli/research/bench-e1.ts";
import { DEFAULT_PROMPTS, DEFAULT_TRACE, reportPath } from "../../services/cli/research/e1-report.ts";
import { startTestSystem } from "../helpers/system.ts";
import { freePort } from "../../services/nats/server.ts";
import { spawnHadis, stopSpawned, waitFor } from "../helpers/processes.ts";

/** Runs bench e1 quietly on five arrivals; returns its JSON report. */
async function benchReport(
  opts: Omit<Parameters<typeof benchE1Command>[0], "trace" | "prompts" | "json">,
): Promise<Record<string, unknown> & { systems: { name: string }[] }> {
  const dir = mkdtempSync(join(tmpdir(), "hadis-bench-"));
  const trace = join(dir, "trace.txt");
  writeFileSync(trace, ["100,1", "200,2", "300,3", "400,4", "500,5"].join("\n") + "\n");
  const quiet = [
    vi.spyOn(process.stdout, "write").mockImplementation(() => true),
    vi.spyOn(process.stderr, "write").mockImplementation(() => true),
  ];
  try {
    await benchE1Command({ ...opts, trace, prompts: DEFAULT_PROMPTS, json: join(dir, "report.json") });
    return JSON.parse(readFileSync(join(dir, "report.json"), "utf8"));
  } finally {
    quiet.forEach((q) => q.mockRestore());
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("hadis bench e1, embedded", () => {
  it("replays a trace against a fresh system and reports it under its policy, with the SLO of its time scale", async () => {
    const report = await benchReport({ embedded: true, policy: "hadis", workers: 2, timeScale: 0.01 });
    expect(report.mode).toBe("live-embedded");
    expect(report.sloMs).toBe(600); // the pool's 60 s at 0.01
    expect(report).toMatchObject({ workers: 2, timeScale: 0.01 });
    expect(report.systems.map((s) => s.name)).toEqual(["hadis"]);
    expect(report.trace).toMatch(/^\/.*trace\.txt$/); // outside the repository: as given
  }, 60_000);

  it("names a trace inside the repository by its path there (a committed report names no machine's folders)", () => {
    expect(reportPath(DEFAULT_TRACE)).toBe("profiles/reference/traces/azure_1to64qps.txt");
  });

  it("on SIGTERM stops like Ctrl-C: the replay ends, and its nats-server goes with it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hadis-bench-term-"));
    const trace = join(dir, "trace.txt");
    writeFileSync(trace, Array.from({ length: 600 }, (_, i) => `${i * 100},${i % 50}`).join("\n") + "\n");
    const bench = spawnHadis([
      "bench",
      "e1",
      "--embedded",
      "--policy",
      "hadis",
      "--workers",
      "2",
      "--time-scale",
      "0.01",
      "--trace",
      trace,
    ]);
    const natsChild = () => {
      try {
        // The server itself (`nats-server -c <conf>`), not the `nats-server --version` check made
        // just before it: that one is gone at once, and a pid read as 0 after it made `kill(0, 0)`
        // (this process's own group) read as a server still alive.
        return (
          Number(
            execFileSync("pgrep", ["-P", String(bench.child.pid), "-f", "nats-server -c "], { encoding: "utf8" })
              .trim()
              .split("\n")[0],
          ) || 0
        );
      } catch {
        return 0;
      }
    };
    try {
      let nats = 0;
      await waitFor(() => (nats = natsChild()) > 0, 30_000, "the bench's nats-server");
      await new Promise((r) => setTimeout(r, 2_000)); // replaying
      bench.child.kill("SIGTERM");
      expect(await bench.exited).toBe(0);
      expect(bench.output()).toMatch(/stopping \(SIGTERM\)/);
      // It says up front what it starts and how long a replay runs (the default trace's is an hour for all nine).
      expect(bench.output()).toMatch(/a fresh embedded system per policy replays 600 requests over 1\.0 min \(policy hadis\)/);
      const alive = () => {
        try {
          process.kill(nats, 0);
          return true;
        } catch {
          return false;
        }
      };
      // (Gone within moments: the bench stops it and waits for it; before, it kept running.)
      await waitFor(() => !alive(), 10_000, "the bench's nats-server gone");
    } finally {
      await stopSpawned();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("against a running system, reports that system's time scale and workers (from its plan), not the options'", async () => {
    const t = await startTestSystem({ workers: 3, timeScale: 0.02 });
    try {
      const report = await benchReport({ nats: t.server.url, policy: "all", workers: 16, timeScale: 0.1 });
      expect(report.mode).toBe(`live ${t.server.url}`);
      expect(report).toMatchObject({ workers: 3, timeScale: 0.02, sloMs: 1_200 });
      expect(report.systems.map((s) => s.name)).toEqual(["static"]); // what its plans name
    } finally {
      await t.stop();
    }
  }, 60_000);

  it("names the server it could not reach", async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    const bench = spawnHadis(["bench", "e1", "--nats", url]);
    try {
      expect(await bench.exited).toBe(1);
      expect(bench.output()).toContain(`hadis: cannot reach NATS at ${url} (connection refused): is the system running there?`);
    } finally {
      await stopSpawned();
    }
  }, 30_000);
});
