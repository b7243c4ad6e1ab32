#!/usr/bin/env node
// Compiles the TypeScript sources to JavaScript in dist/ (tsconfig.build.json: contracts, actors,
// services and tools, with declarations) when any source is newer than the last build, so that
// `npm start` and the `hadis` command run compiled code. Run by ops/scripts/ensure-deps.mjs (the
// set-up of `npm start` and `npm test`) and by `npm run build`. Uses only Node built-ins.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const stamp = join(root, "dist", ".build-stamp");
const SOURCES = ["contracts", "actors", "services", "tools"];
const CONFIGS = ["tsconfig.json", "tsconfig.build.json", "package-lock.json"];

/** The newest modification time of the sources and build configuration, ms. */
function newestSourceMs() {
  let newest = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  for (const dir of SOURCES) walk(join(root, dir));
  for (const file of CONFIGS) if (existsSync(join(root, file))) newest = Math.max(newest, statSync(join(root, file)).mtimeMs);
  return newest;
}

/**
 * Removes what dist/ holds for a source that is gone (moved or deleted): tsc never removes an
 * output, and the package ships dist/ whole. Returns the files removed.
 */
export function pruneOrphans() {
  const removed = [];
  const walk = (dir) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(path);
        if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
        continue;
      }
      const stem = /^(.*)\.(js|d\.ts|js\.map|d\.ts\.map)$/.exec(entry.name)?.[1];
      if (stem === undefined) continue;
      const source = join(root, dir.slice(join(root, "dist").length), `${stem}.ts`);
      if (!existsSync(source)) {
        rmSync(path);
        removed.push(path);
      }
    }
  };
  for (const dir of SOURCES) walk(join(root, "dist", dir));
  return removed;
}

/** True when dist/ is missing or older than a source. */
export function buildIsStale() {
  return !existsSync(stamp) || statSync(stamp).mtimeMs < newestSourceMs();
}

/** Compiles when stale (`force`: always); throws with tsc's output when it fails. */
export function build({ force = false, quiet = false } = {}) {
  if (!force && !buildIsStale()) {
    pruneOrphans(); // (a source deleted without touching another leaves the build current)
    return false;
  }
  if (!quiet) process.stderr.write("[hadis setup] compiling TypeScript to dist/ (tsc -p tsconfig.build.json)…\n");
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const result = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: root, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`tsc -p tsconfig.build.json failed:\n${result.stdout}${result.stderr}`);
  pruneOrphans();
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    build({ force: process.argv.includes("--force") });
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}
