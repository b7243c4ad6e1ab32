/**
 * The layout the code promises, checked on the source itself: no import cycles, imports only
 * one way (contracts ← actors ← services; tools and benches use them, never the reverse), one
 * home for each outside library that must stay at the edge, and no source file over 500 lines.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SOURCE_DIRS = ["contracts", "actors", "services", "tools", "bench"];

function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" || e.name === "results" ? [] : walk(path);
    return /\.(ts|mts|mjs)$/.test(e.name) ? [path] : [];
  });
}

/** Every specifier a file imports: static, re-exported, type-only and dynamic alike. */
function specifiersOf(text: string): string[] {
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^;]*?\bfrom\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
    /\bimport\s+["']([^"']+)["']/g,
  ];
  for (const pattern of patterns) for (const m of text.matchAll(pattern)) found.push(m[1]);
  return found;
}

/** The repository-relative files a file imports (relative specifiers only), and the packages. */
function importsOf(file: string): { files: string[]; packages: string[] } {
  const text = readFileSync(join(ROOT, file), "utf8");
  const specs = specifiersOf(text);
  return {
    files: specs.filter((s) => s.startsWith(".")).map((s) => relative(ROOT, resolve(ROOT, dirname(file), s))),
    packages: specs.filter((s) => !s.startsWith(".") && !s.startsWith("node:")),
  };
}

const files = SOURCE_DIRS.flatMap(walk).sort();
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const top = (f: string) => f.split("/")[0];

/** The strongly connected components of more than one file (or a file importing itself): Tarjan's. */
function cycles(): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v)?.files ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        on.delete(w);
        scc.push(w);
        if (w === v) break;
      }
      if (scc.length > 1 || graph.get(v)!.files.includes(v)) out.push(scc.sort());
    }
  };
  for (const f of files) if (!idx.has(f)) visit(f);
  return out;
}

/** `from → to` for each import of a file under `from` that reaches a file under one of `to`. */
function importsInto(from: (f: string) => boolean, to: (f: string) => boolean): string[] {
  return files.filter(from).flatMap((f) =>
    graph
      .get(f)!
      .files.filter(to)
      .map((t) => `${f} → ${t}`),
  );
}

/** The files that import a package whose name starts with one of `prefixes`. */
function importersOf(prefixes: string[]): string[] {
  return files.filter((f) => graph.get(f)!.packages.some((p) => prefixes.some((x) => p === x || p.startsWith(x)))).sort();
}

describe("the source layout", () => {
  it("finds the source files it checks (the walk is not empty)", () => {
    expect(files.length).toBeGreaterThan(150);
    expect(files).toContain("services/system.ts");
  });

  it("has no import cycle, type-only and dynamic imports included", () => {
    expect(cycles()).toEqual([]);
  });

  it("imports one way: contracts nothing of ours, actors only contracts, services no tools, benches or tests", () => {
    expect(
      importsInto(
        (f) => top(f) === "contracts",
        (t) => top(t) !== "contracts",
      ),
    ).toEqual([]);
    expect(
      importsInto(
        (f) => top(f) === "actors",
        (t) => !["contracts", "actors"].includes(top(t)),
      ),
    ).toEqual([]);
    expect(
      importsInto(
        (f) => top(f) === "services",
        (t) => ["tools", "bench", "test"].includes(top(t)),
      ),
    ).toEqual([]);
    expect(
      importsInto(
        (f) => top(f) === "tools",
        (t) => ["bench", "test"].includes(top(t)),
      ),
    ).toEqual([]);
  });

  it("keeps NATS, onnxruntime and the OpenTelemetry SDK at the edge, each in its own folder", () => {
    expect(importersOf(["@nats-io/"]).filter((f) => !f.startsWith("services/nats/"))).toEqual([]);
    expect(importersOf(["onnxruntime-node"])).toEqual(["services/onnx/runtime.ts"]);
    expect(importersOf(["highs"]).filter((f) => !f.startsWith("services/solver/"))).toEqual([]);
    // The API package (spans, context) is used where spans are made; the SDK only in telemetry/.
    expect(
      importersOf(["@opentelemetry/sdk-", "@opentelemetry/exporter-", "@opentelemetry/resources", "@opentelemetry/core"]).filter(
        (f) => !f.startsWith("services/telemetry/") && !f.startsWith("bench/"),
      ),
    ).toEqual([]);
  });

  it("has no grab-bag folder: services/lib is gone", () => {
    expect(files.filter((f) => f.startsWith("services/lib/"))).toEqual([]);
  });

  it("has no source file over 500 lines", () => {
    const long = files.map((f) => ({ f, lines: readFileSync(join(ROOT, f), "utf8").split("\n").length })).filter((x) => x.lines > 500);
    expect(long).toEqual([]);
  });
});
