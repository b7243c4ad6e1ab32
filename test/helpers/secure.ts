/**
 * Starts nats-server with the per-role accounts of `ops/nats/accounts.conf`: fresh random
 * passwords for every role, handed to the server through its environment (never written to disk).
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { startNatsServer, type LocalServer, type LocalServerOptions } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import type { NatsCredentials, ServiceKind } from "../../services/system.ts";
import { inboxPrefixOf } from "../../contracts/subjects.ts";

/** Path of the accounts block every secure config includes. */
export const ACCOUNTS_CONF = fileURLToPath(new URL("../../ops/nats/accounts.conf", import.meta.url));

/** The roles of accounts.conf. */
export const ROLES = ["client", "router", "worker", "discriminator", "resource-manager", "observer", "admin"] as const;
/** One role. */
export type Role = (typeof ROLES)[number];

/** Environment variable names of a role's user and password (`HADIS_<ROLE>_NATS_USER|PASS`). */
export function roleEnv(role: Role): { user: string; pass: string } {
  const base = `HADIS_${role.toUpperCase().replace(/-/g, "_")}_NATS`;
  return { user: `${base}_USER`, pass: `${base}_PASS` };
}

/** Fresh credentials for every role, and the server environment that carries them. */
export function generateCredentials(): { credentials: Record<Role, NatsCredentials>; env: Record<string, string> } {
  const credentials = {} as Record<Role, NatsCredentials>;
  const env: Record<string, string> = {};
  for (const role of ROLES) {
    // nats-server parses an environment value as a config value: a letter first keeps it a string.
    credentials[role] = { user: `hadis-${role}`, pass: `p${randomBytes(18).toString("hex")}` };
    env[roleEnv(role).user] = credentials[role].user;
    env[roleEnv(role).pass] = credentials[role].pass;
  }
  return { credentials, env };
}

/** A secured server with the credentials of each role. */
export interface SecureServer {
  server: LocalServer;
  credentials: Record<Role, NatsCredentials>;
  /** Server log since start (permission violations are logged there). */
  log(): string;
  /** The log's lines where the server refused a publish or subscription for want of permission. */
  violations(): string[];
  /** Connects as a role. */
  connectAs(role: Role, name?: string): Promise<NatsConnection>;
  /** `SystemOptions.credentials` for the four service roles. */
  serviceCredentials(kind: ServiceKind): NatsCredentials;
}

/** The inbox prefix a role connects with: clients and the operator keep the default `_INBOX`. */
export function roleInbox(role: Role): { inboxPrefix?: string } {
  return role === "client" || role === "admin" ? {} : { inboxPrefix: inboxPrefixOf(role) };
}

/** The accounts block with extra server options (cluster blocks), ready for `extraConfig`. */
export function secureConfigText(extra = ""): string {
  return [extra, readFileSync(ACCOUNTS_CONF, "utf8")].join("\n");
}

/**
 * Lines of a nats-server log where it refused a publish or subscription for want of permission:
 * it logs them as `Publish Violation` and `Subscription Violation` (the client is told
 * `Permissions Violation for …`, which the log does not say).
 */
export function permissionViolations(log: string): string[] {
  return log.split("\n").filter((line) => /\b(Publish|Subscription) Violation\b/.test(line));
}

/** Starts one secured server in a temporary folder. */
export async function startSecureServer(opts: LocalServerOptions = {}): Promise<SecureServer> {
  const { credentials, env } = generateCredentials();
  let log = "";
  const server = await startNatsServer({ ...opts, env, extraConfig: secureConfigText(opts.extraConfig), onLog: (text) => (log += text) });
  return {
    server,
    credentials,
    log: () => log,
    violations: () => permissionViolations(log),
    connectAs: (role, name = `test-${role}`) =>
      connectNats(server.url, name, { user: credentials[role].user, pass: credentials[role].pass, ...roleInbox(role) }),
    serviceCredentials: (kind) => ({ ...credentials[kind], ownRole: true }),
  };
}
