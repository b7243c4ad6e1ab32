#!/usr/bin/env node
// Installs what `npm start` and `npm test` need on a fresh machine: npm packages (when
// node_modules is missing or older than the lock), the compiled JavaScript in dist/ (when a
// source is newer), Debian's nats-server (when missing and running as root), and for the tests
// (`--test`) Debian's chromium; otherwise says exactly what to run. Uses only Node built-ins.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "./build.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const say = (line) => process.stderr.write(`[hadis setup] ${line}\n`);
const run = (cmd, args, env = {}) => spawnSync(cmd, args, { cwd: root, stdio: "inherit", env: { ...process.env, ...env } }).status === 0;
const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
/** Installs a Debian package when running as root on a Debian-like system (else does nothing). */
const aptInstall = (pkg, why) => {
  if (!isRoot || !existsSync("/usr/bin/apt-get")) return;
  say(`installing ${pkg}${why} (apt-get install -y ${pkg})…`);
  run("apt-get", ["update", "-qq"]);
  run("apt-get", ["install", "-y", "-qq", pkg], { DEBIAN_FRONTEND: "noninteractive" });
};

// 1. npm packages.
const modules = join(root, "node_modules");
const marker = join(modules, ".package-lock.json");
const lock = join(root, "package-lock.json");
if (!existsSync(marker) || statSync(marker).mtimeMs < statSync(lock).mtimeMs) {
  say("installing npm packages (npm ci)…");
  // onnxruntime-node's postinstall would try to download CUDA libraries; CPU needs none.
  if (!run("npm", ["ci", "--no-audit", "--no-fund"], { ONNXRUNTIME_NODE_INSTALL: "skip" })) {
    say("npm ci failed; run `npm ci` yourself and read its error");
    process.exit(1);
  }
}

// 1b. The compiled CLI and services (dist/), which `npm start` and the `hadis` command run.
try {
  build();
} catch (err) {
  say(err.message);
  process.exit(1);
}

// 2. nats-server.
const candidates = [
  process.env.NATS_SERVER_BIN,
  "nats-server",
  "/usr/sbin/nats-server",
  "/usr/bin/nats-server",
  "/usr/local/bin/nats-server",
].filter(Boolean);
const haveNats = () => candidates.some((bin) => spawnSync(bin, ["--version"]).status === 0);
if (!haveNats()) {
  aptInstall("nats-server", "");
  if (!haveNats()) {
    say("nats-server is missing. Install it with:  sudo apt-get install -y nats-server");
    say("(or download a release binary and set NATS_SERVER_BIN=/path/to/nats-server)");
    process.exit(1);
  }
}

// 3. For the tests (`--test`): Debian's chromium, which the dashboard's browser test drives.
if (process.argv.includes("--test") && !existsSync("/usr/bin/chromium")) {
  aptInstall("chromium", " for the browser test");
  if (!existsSync("/usr/bin/chromium")) say("the dashboard's browser test needs Debian's chromium:  sudo apt-get install -y chromium");
}

// 4. For the tests: openssl, which makes the TLS tests' self-signed certificates.
if (process.argv.includes("--test") && !["/usr/bin/openssl", "/bin/openssl"].some((p) => existsSync(p))) {
  aptInstall("openssl", " for the TLS tests");
  if (!existsSync("/usr/bin/openssl")) say("the TLS tests need openssl:  sudo apt-get install -y openssl");
}
