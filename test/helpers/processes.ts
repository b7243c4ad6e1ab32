/** Spawns `hadis` CLI commands as child processes (as an operator would run them). */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The compiled command (the test run's global setup builds dist/ when a source is newer). */
const CLI = fileURLToPath(new URL("../../dist/services/cli/main.js", import.meta.url));

/** A spawned command with its collected output. */
export interface Spawned {
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code (or signal name). */
  exited: Promise<number | string>;
}

/**
 * Runs `hadis <args>` in a child process. `group`: in a process group of its own, as a terminal
 * runs a foreground job (`process.kill(-pid, "SIGINT")` is then what Ctrl-C does).
 */
export function spawnHadis(args: string[], env: Record<string, string> = {}, opts: { group?: boolean } = {}): Spawned {
  const child = spawn(process.execPath, [CLI, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, HADIS_LOG: "info", ...env },
    detached: opts.group ?? false,
  });
  running.add({ child, group: opts.group ?? false });
  child.once("exit", () => running.forEach((r) => r.child === child && running.delete(r)));
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? -1)));
  return { child, output: () => out, exited };
}

const running = new Set<{ child: ChildProcess; group: boolean }>();

/**
 * Stops every spawned command still running, with its process group when it has one: SIGTERM
 * first, so that a `hadis start` stops the nats-server it runs in a session of its own, then
 * SIGKILL after `graceMs`. A test that fails half-way must not leave them behind.
 */
export async function stopSpawned(graceMs = 5_000): Promise<void> {
  const signal = (sig: NodeJS.Signals) => {
    for (const { child, group } of running) {
      try {
        if (group && child.pid) process.kill(-child.pid, sig);
        else child.kill(sig);
      } catch {
        // gone already
      }
    }
  };
  signal("SIGTERM");
  const end = Date.now() + graceMs;
  while (running.size > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  signal("SIGKILL");
  running.clear();
}

/** Waits until `check` holds or throws after `ms`. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms = 20_000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
