/**
 * The package as another project gets it: built (`npm run build`), packed (`npm pack`), installed
 * from the tarball into a scratch project, and used there against a real nats-server and the
 * services: `HadisClient` from plain JavaScript, its types from TypeScript, the JSON Schemas.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const TSC = join(ROOT, "node_modules", ".bin", "tsc");
let t: TestSystem;
let scratch: string;

/** Runs a command to its end; throws with its output when it fails. */
function run(command: string, args: string[], cwd: string, timeout = 180_000): string {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", timeout, env: { ...process.env, npm_config_update_notifier: "false" } });
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} (exit ${result.status}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** Runs a command without blocking this process (the services under test run in it); resolves with its output. */
function runAsync(command: string, args: string[], cwd: string, timeout: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, timeout });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d));
    child.stderr.on("data", (d: Buffer) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${command} ${args.join(" ")} (exit ${code}):\n${stdout}\n${stderr}`)),
    );
  });
}

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "hadis-client-package-"));
  run("npm", ["run", "build", "--silent"], ROOT);
  run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", scratch], ROOT);
  const [tarball] = readdirSync(scratch).filter((f) => f.endsWith(".tgz"));
  const project = join(scratch, "project");
  run("mkdir", ["-p", project], scratch);
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "scratch", private: true, type: "module", dependencies: { "hadis-ts": `file:${join(scratch, tarball)}` } }),
  );
  // From npm's cache where it can (the repository's own install filled it); no install scripts (onnxruntime's downloads CUDA).
  run("npm", ["install", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund", "--silent"], project, 240_000);
  scratch = project;
  t = await startTestSystem();
}, 420_000);

afterAll(async () => {
  await t?.stop();
  if (scratch) rmSync(join(scratch, ".."), { recursive: true, force: true });
});

describe("the packed client, installed in another project", () => {
  it("calls hadis.generate and follows a job from plain JavaScript, with the contract's schemas", async () => {
    writeFileSync(
      join(scratch, "use.mjs"),
      `import { createRequire } from "node:module";
import { HadisClient, connectNats, GenerateRequestSchema, HadisError, ErrorCodes, subjects } from "hadis-ts";
const require = createRequire(import.meta.url);
const requestSchema = require("hadis-ts/schemas/GenerateRequest.json");
const nc = await connectNats(process.argv[2], "scratch-project");
const client = new HadisClient(nc);
const reply = await client.generate({ prompt: "a red bicycle", deadlineMs: 20000, seed: 5 });
const job = await client.submitJob({ prompt: "a lighthouse at dusk", deadlineMs: 20000 });
const kinds = [];
for await (const e of client.job(job.jobId)) kinds.push(e.kind);
let refused = null;
try { await client.generate({ prompt: "x", colour: "red" }); } catch (err) { refused = err instanceof HadisError ? err.code : String(err); }
await nc.close();
console.log(JSON.stringify({
  route: reply.route, seed: reply.seed, png: Buffer.from(reply.image.subarray(1, 4)).toString(), kinds, refused,
  schemaChecks: GenerateRequestSchema.safeParse({ prompt: "x", steps: 4 }).success && !GenerateRequestSchema.safeParse({ prompt: 3 }).success,
  jsonSchema: requestSchema.title, status: ErrorCodes.too_many_requests, generate: subjects().generate,
}));
`,
    );
    const out = JSON.parse((await runAsync(process.execPath, ["use.mjs", t.server.url], scratch, 60_000)).trim());
    expect(out).toEqual({
      route: expect.stringMatching(/^(light|heavy|light->heavy)$/),
      seed: 5,
      png: "PNG",
      kinds: expect.arrayContaining(["queued", "routed", "done"]),
      refused: "invalid_request",
      schemaChecks: true,
      jsonSchema: "GenerateRequest",
      status: 429,
      generate: "hadis.generate",
    });
    expect(out.kinds.at(-1)).toBe("done");
  });

  it("gives TypeScript projects the contract's types (a wrong field value does not compile)", () => {
    writeFileSync(
      join(scratch, "check.ts"),
      `import { HadisClient, type GenerateRequest, type GenerateReplyRead, type JobEventRead } from "hadis-ts";
const ok: GenerateRequest = { prompt: "a red bicycle", steps: 4, width: 1024, height: 1024, quality: "fast" };
// @ts-expect-error quality is auto, fast or best
const bad: GenerateRequest = { prompt: "x", quality: "ultra" };
declare const client: HadisClient;
const reply: Promise<GenerateReplyRead> = client.generate(ok);
declare const event: JobEventRead;
const score: number | undefined = event.kind === "judged" ? event.score : undefined;
export { ok, bad, reply, score };
`,
    );
    writeFileSync(
      join(scratch, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
        },
        files: ["check.ts"],
      }),
    );
    run(TSC, ["-p", "."], scratch, 120_000);
    // The check has teeth: without the expectation the wrong value is a compile error.
    writeFileSync(
      join(scratch, "check.ts"),
      `import type { GenerateRequest } from "hadis-ts";\nexport const bad: GenerateRequest = { prompt: "x", quality: "ultra" };\n`,
    );
    expect(() => run(TSC, ["-p", "."], scratch, 120_000)).toThrow(/"ultra"' is not assignable/);
  });

  it("ships the compiled code, the sources, profiles and schemas, not the tests", () => {
    const installed = join(scratch, "node_modules", "hadis-ts");
    const list = (dir: string) => readdirSync(join(installed, dir));
    expect(readdirSync(installed).sort()).toEqual(expect.arrayContaining(["dist", "schemas", "profiles", "package.json"]));
    expect(readdirSync(installed)).not.toContain("test");
    expect(readdirSync(installed)).not.toContain("bench");
    expect(list("schemas")).toContain("GenerateReply.json");
    expect(list("dist/services/client")).toEqual(expect.arrayContaining(["index.js", "index.d.ts"]));
    // Every compiled module still has its source: a file moved or removed leaves nothing behind in dist/.
    const compiled = (dir: string): string[] =>
      readdirSync(join(installed, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? compiled(join(dir, e.name)) : e.name.endsWith(".js") ? [join(dir, e.name)] : [],
      );
    const orphans = compiled("dist").filter((js) => !existsSync(join(ROOT, js.slice("dist/".length).replace(/\.js$/, ".ts"))));
    expect(orphans).toEqual([]);
  });
});
