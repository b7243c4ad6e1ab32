/** How the command-line tools (`hadis generate`, `hadis status`) connect, and how they say they could not. */
import type { OutputConfiguration } from "commander";
import type { NatsConnection } from "../nats/connection.ts";
import { DEFAULT_NATS_URL } from "../../contracts/limits.ts";
import { natsServerOf, natsTlsFromEnv, natsUrls, toolCredentials } from "./credentials.ts";

/** A failure on the caller's side (no server, bad settings, a file that cannot be written): not the system's, not retryable. */
export class ToolFailure extends Error {}

/**
 * Connects as `role` to `--nats` (else `NATS_URL`, else where `npm start` listens), without
 * reconnecting; settings and connection problems are `ToolFailure`s that say what to check.
 */
export async function connectTool(
  given: string | undefined,
  env: NodeJS.ProcessEnv,
  role: "client" | "observer",
  name: string,
): Promise<NatsConnection> {
  const server = natsServerOf(given, env, DEFAULT_NATS_URL)!;
  const nats = server.value;
  let urls: string | string[], credentials: ReturnType<typeof toolCredentials>, tls: ReturnType<typeof natsTlsFromEnv>;
  try {
    [urls, credentials, tls] = [
      natsUrls(nats, server.source === "NATS_URL" ? "NATS_URL" : "--nats"),
      toolCredentials(env, role),
      natsTlsFromEnv(env),
    ];
  } catch (err) {
    throw new ToolFailure((err as Error).message);
  }
  // One server at a time: nats.js, told not to reconnect, drops a second server from a list for
  // each one that refuses the first connection (its pool loses the last entry), so a list with a
  // node down failed about half the time. In a random order, as nats.js would: tools spread over a cluster.
  const failures: string[] = [];
  // (Imported here: `main.ts` reads this module for every command, which need not load the client.)
  const { connectNats } = await import("../nats/connection.ts");
  for (const url of shuffled([urls].flat())) {
    try {
      return await connectNats(url, name, { maxReconnectAttempts: 0, timeout: 3_000, ...credentials, ...(tls ? { tls } : {}) });
    } catch (err) {
      failures.push((err as Error).message);
    }
  }
  const why = new Set(failures).size === 1 ? failures[0] : failures.join("; ");
  throw new ToolFailure(
    `cannot reach NATS at ${nats} (${why}); is \`npm start\` running${credentials ? `, and are the credentials of ${credentials.user} right` : ""}?`,
  );
}

/** `items` in a random order (in place). */
function shuffled<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

/** The `--json` form of a failure on the caller's side. */
export function clientError(message: string): { code: "client_error"; message: string; retryable: false } {
  return { code: "client_error", message, retryable: false };
}

/**
 * A tool command's output settings when `--json` is given: a mistake on its command line (a bad
 * option value, a missing argument) is one `{"error": …}` object on stdout, as every other failure,
 * without the hint after it; commander still exits 1.
 */
export function jsonErrorsWhen(json: boolean): OutputConfiguration {
  if (!json) return {};
  return {
    outputError: (message) =>
      void process.stdout.write(JSON.stringify({ error: clientError(message.replace(/^error: /, "").trim()) }) + "\n"),
    writeErr: () => undefined,
  };
}

/** Prints a `ToolFailure` as the tool's output: one `{"error": …}` object with `--json`, a line on stderr otherwise; exit code 1. */
export function reportToolFailure(err: ToolFailure, json: boolean | undefined): void {
  process.exitCode = 1;
  if (json) process.stdout.write(JSON.stringify({ error: clientError(err.message) }) + "\n");
  else process.stderr.write(`hadis: ${err.message}\n`);
}
