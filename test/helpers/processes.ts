/** Spawns `hadis` CLI commands as child processes (as an operator would run them). */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const CLI = fileURLToPath(new URL("../../services/cli/main.ts", import.meta.url));

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
  const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, HADIS_LOG: "info", ...env },
    detached: opts.group ?? false,
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? -1)));
  return { child, output: () => out, exited };
}

/** Waits until `check` holds or throws after `ms`. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms = 20_000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
