/** `hadis bench e1` in its default mode (`--embedded`: a fresh server and system per policy), on a few arrivals. */
import { describe, expect, it, vi } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchE1Command } from "../../services/cli/bench-e1.ts";
import { DEFAULT_PROMPTS } from "../../services/cli/e1-report.ts";

describe("hadis bench e1, embedded", () => {
  it("replays a trace against a fresh system and reports it under its policy, with the SLO of its time scale", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hadis-bench-"));
    const trace = join(dir, "trace.txt");
    writeFileSync(trace, ["100,1", "200,2", "300,3", "400,4", "500,5"].join("\n") + "\n");
    const quiet = [vi.spyOn(process.stdout, "write").mockImplementation(() => true), vi.spyOn(process.stderr, "write").mockImplementation(() => true)];
    try {
      await benchE1Command({ embedded: true, policy: "hadis", trace, prompts: DEFAULT_PROMPTS, workers: 2, timeScale: 0.01, json: join(dir, "report.json") });
    } finally {
      quiet.forEach((q) => q.mockRestore());
    }
    const report = JSON.parse(readFileSync(join(dir, "report.json"), "utf8"));
    expect(report.mode).toBe("live-embedded");
    expect(report.sloMs).toBe(600); // the pool's 60 s at 0.01
    expect(report.systems.map((s: { name: string }) => s.name)).toEqual(["hadis"]);
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});
