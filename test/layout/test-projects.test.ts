/**
 * The test projects (vitest.config.ts) hold what they say: a `unit` file starts no server, process
 * or thread and sleeps on no real timer, so unit files can run in parallel on simulated clocks;
 * every test file is in exactly one project.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { INTEGRATION, SERIAL } from "../../vitest.config.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".test.ts") ? [join(dir, e.name)] : [],
  );
}

/** A glob of the config's kind (`**`, `*`, `{a,b}`) as a regular expression over repository paths. */
function globRegex(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (glob.startsWith("**/", i)) {
      re += "(?:.*/)?";
      i += 2;
    } else if (c === "*") re += "[^/]*";
    else if (c === "{") re += "(?:";
    else if (c === "}") re += ")";
    else if (c === ",") re += "|";
    else re += c.replace(/[.+?^$()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

const matches = (globs: string[]) => (file: string) => globs.some((g) => globRegex(g).test(file));
const files = walk("test").sort();
const serial = files.filter(matches(SERIAL));
const integration = files.filter((f) => matches(INTEGRATION)(f) && !serial.includes(f));
const unit = files.filter((f) => !serial.includes(f) && !integration.includes(f));

/** Modules only an integration test may import: a nats-server or the system, a process, a proxy, an ONNX thread or session. (HiGHS in-process is deterministic CPU: unit tests use it.) */
const REAL_MODULES = [
  /helpers\/(nats|system|processes|cluster|proxy|secure|tiny-models)\.ts$/,
  /^node:child_process$/,
  /services\/onnx\/(threaded|thread-client|runtime|pipeline)\.ts$/,
];

/** The specifiers a file imports (static and dynamic). */
const importsOf = (text: string) => [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)["']([^"']+)["']/g)].map((m) => m[1]);

describe("the test projects", () => {
  it("put every test file in one project, and each project has files", () => {
    expect(files.length).toBe(unit.length + integration.length + serial.length);
    expect([unit.length > 40, integration.length > 30, serial.length >= 3]).toEqual([true, true, true]);
    // Every glob names at least one file (a renamed test would otherwise fall into `unit` unseen).
    expect([...INTEGRATION, ...SERIAL].filter((g) => !files.some((f) => globRegex(g).test(f)))).toEqual([]);
  });

  it("keep unit files off real parts: no server, process, proxy, thread or ONNX session", () => {
    const offending = unit.flatMap((f) =>
      importsOf(readFileSync(join(ROOT, f), "utf8"))
        .filter((spec) => REAL_MODULES.some((p) => p.test(spec)))
        .map((spec) => `${f}: ${spec}`),
    );
    expect(offending).toEqual([]);
  });

  it("keep unit files off real sleeps: a timer of more than 0 ms only under vi.useFakeTimers()", () => {
    const sleeping = unit.filter((f) => {
      const text = readFileSync(join(ROOT, f), "utf8");
      // (A timer of 0 ms lets other callbacks run; a SimulatedClock's `clock.setTimeout` is not a real timer.)
      return /(?<![.\w])setTimeout\([^,]+,\s*(?!0\s*\))[^\s)]/.test(text) && !text.includes("vi.useFakeTimers(");
    });
    expect(sleeping).toEqual([]);
  });
});
