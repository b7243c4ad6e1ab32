/** The router scorer on the command line: learned by default, its model file checked before anything starts. */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { unreadOptions } from "../../services/cli/serve.ts";
import { defaultScorerFor } from "../../services/files/router-scoring.ts";
import { spawnHadis, stopSpawned } from "../helpers/processes.ts";

const dir = mkdtempSync(join(tmpdir(), "hadis-scorer-"));
const malformed = join(dir, "difficulty-model.json");
writeFileSync(
  malformed,
  JSON.stringify({
    version: 1,
    kind: "hashed-ngram-linear",
    hashBits: 8,
    ngramOrders: [1],
    columns: [1, 2],
    pairs: [{ light: "a", heavy: "b", intercept: 0, weights: [1], scoreMean: 0, scoreStd: 1, use: true }],
    source: "t",
  }),
);

afterAll(() => stopSpawned());

describe("--scorer and --difficulty-model", () => {
  it("default to the learned scorer for hadis-plus and to the paper's rule-based analyzer for every other policy", () => {
    expect(defaultScorerFor("hadis-plus")).toBe("learned");
    expect(defaultScorerFor("hadis")).toBe("analyzer");
    expect(defaultScorerFor("diffserve")).toBe("analyzer");
  });

  it("`serve router` refuses a malformed model file before connecting (exit 2), naming the file and the field", async () => {
    // Nothing listens on port 1: a check after connecting would fail on the connection instead.
    const serve = spawnHadis(["serve", "router", "--nats", "nats://127.0.0.1:1", "--difficulty-model", malformed]);
    expect(await serve.exited).toBe(2);
    expect(serve.output()).toContain(`difficulty model ${malformed}: pairs.0.weights: has 1 weights for 2 columns`);
  }, 30_000);

  it("`sim` fails on a malformed model file, naming it", async () => {
    const sim = spawnHadis(["sim", "--policy", "hadis-plus", "--difficulty-model", malformed]);
    expect(await sim.exited).toBe(1);
    expect(sim.output()).toContain(`difficulty model ${malformed}: pairs.0.weights`);
  }, 60_000);

  it("`serve` says --difficulty-model is read by the router only", () => {
    expect(unreadOptions("worker", [{ key: "difficultyModel", flag: "--difficulty-model" }])).toEqual([
      "--difficulty-model does nothing for the worker service (read by: router)",
    ]);
  });
});
