/**
 * The `hadis` command runs compiled JavaScript and each command loads only what it uses:
 * `--version`, `generate` and `status` load no onnxruntime, no NLP model, no telemetry SDK (and
 * no other service's machinery), against a real system on a real nats-server.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const BIN = join(root, "services/cli/hadis.mjs");
const RECORD = join(root, "test/helpers/record-loads.mjs");
/** Packages none of these commands may load. */
const HEAVY = [
  "onnxruntime-node",
  "wink-nlp",
  "wink-eng-lite-web-model",
  "@opentelemetry/",
  "highs",
  "xstate",
  "vega",
  "@resvg/",
  "prom-client",
  "tsx",
];

/** Our modules none of these commands may load (the resource manager's list of policy names, a constant, excepted). */
const HEAVY_OWN =
  /\/dist\/(services\/(router|worker|discriminator|resource-manager\/(?!policy-names\.js)|dashboard|gateway|onnx|solver|telemetry\/(?!log\.js)|system\.js|cli\/research\/(?!commands\.js))|tools\/)/;

let t: TestSystem;
const dir = mkdtempSync(join(tmpdir(), "hadis-loads-"));
beforeAll(async () => {
  // The build `npm test` runs first (a no-op when dist/ is current).
  const built = spawnSync(process.execPath, [join(root, "ops/scripts/build.mjs")], { cwd: root, encoding: "utf8" });
  expect(built.status, built.stderr).toBe(0);
  t = await startTestSystem({ policy: "static" });
}, 120_000);
afterAll(async () => {
  await t?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `hadis <args>` (the system in this process keeps serving meanwhile) and returns what it printed, its exit code, its wall time and the modules it loaded. */
async function hadis(name: string, args: string[]) {
  const log = join(dir, `${name}.txt`);
  const started = performance.now();
  const child = spawn(process.execPath, ["--import", RECORD, BIN, ...args], { cwd: root, env: { ...process.env, LOAD_LOG: log } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const status = await new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const wallMs = performance.now() - started;
  const loaded = readFileSync(log, "utf8").trim().split("\n");
  return { status, stdout, stderr, wallMs, loaded };
}

const packagesOf = (urls: string[]) => [...new Set(urls.flatMap((u) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u)?.[1] ?? []))].sort();
const ownModules = (urls: string[]) =>
  urls.filter((u) => u.startsWith("file:") && !u.includes("/node_modules/") && !u.endsWith("record-loads.mjs"));

describe("the compiled hadis command", () => {
  it.each([
    { name: "version", args: () => ["--version"], prints: /^\d+\.\d+\.\d+\n$/ },
    {
      name: "generate",
      args: () => ["generate", "a red bicycle", "--nats", t.server.url, "--json", "--deadline-ms", "10000"],
      prints: /^\{"v":1,"requestId":"\w+"/,
    },
    { name: "status", args: () => ["status", "--nats", t.server.url, "--json", "--listen-ms", "1500"], prints: /^\{"manager":/ },
  ])(
    "$name runs compiled code and loads none of onnxruntime, wink-nlp, the telemetry SDK",
    async ({ name, args, prints }) => {
      const run = await hadis(name, args());
      expect(run.status, run.stderr + run.stdout).toBe(0);
      expect(run.stdout).toMatch(prints);
      const packages = packagesOf(run.loaded);
      for (const heavy of HEAVY)
        expect(
          packages.filter((p) => p.startsWith(heavy)),
          `${name} loads ${packages.join(", ")}`,
        ).toEqual([]);
      // Our own modules, compiled: nothing from source (.ts) and no service of the system.
      const own = ownModules(run.loaded);
      expect(own.filter((u) => !u.includes("/dist/") && !u.endsWith("services/cli/hadis.mjs"))).toEqual([]);
      // Nor any service, the ONNX side, the tiny-model generator, the solver, tracing's setup or a research command.
      expect(own.filter((u) => HEAVY_OWN.test(u))).toEqual([]);
      console.log(`hadis ${name}: ${Math.round(run.wallMs)} ms, ${run.loaded.length} modules, packages: ${packages.join(", ")}`);
    },
    30_000,
  );
});
