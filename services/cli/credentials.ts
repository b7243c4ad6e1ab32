/**
 * NATS credentials from the environment, never from files in the repository:
 * `HADIS_<ROLE>_NATS_USER` / `_PASS` per role (ROUTER, WORKER, DISCRIMINATOR, RESOURCE_MANAGER),
 * else `HADIS_NATS_USER` / `HADIS_NATS_PASS` for every service of this process.
 */
import { existsSync } from "node:fs";
import { inboxPrefixOf } from "../../contracts/subjects.ts";
import type { NatsCredentials, NatsTlsFiles } from "../nats/connection.ts";
import { SERVICE_KINDS, type ServiceKind } from "../../contracts/service-kinds.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

/** The credentials of a service kind, or undefined (no authentication); a half-set pair is refused here, before anything connects. */
export function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): ((kind: ServiceKind) => NatsCredentials | undefined) | undefined {
  const any = Object.keys(env).some((k) => /^HADIS_([A-Z_]+_)?NATS_(USER|PASS)$/.test(k));
  if (!any) return undefined;
  const byKind = new Map(SERVICE_KINDS.map((kind) => [kind, serviceCredentials(env, kind)]));
  return (kind) => byKind.get(kind);
}

/**
 * The first user and password set among `<prefix>_USER` / `<prefix>_PASS` (a role's, then the
 * shared one), with the prefix that gave them; a half-set pair is refused, not dropped or mixed
 * with another prefix's half. Empty values count as unset.
 */
function userPair(env: NodeJS.ProcessEnv, prefixes: readonly string[]): { user: string; pass: string; prefix: string } | undefined {
  for (const prefix of prefixes) {
    const user = env[`${prefix}_USER`];
    const pass = env[`${prefix}_PASS`];
    if (!user && !pass) continue;
    if (!user || !pass)
      throw new ConfigurationError(
        `${prefix}_USER and ${prefix}_PASS go together: ${user ? `${prefix}_PASS` : `${prefix}_USER`} is not set`,
      );
    return { user, pass, prefix };
  }
  return undefined;
}

function serviceCredentials(env: NodeJS.ProcessEnv, kind: ServiceKind): NatsCredentials | undefined {
  const found = userPair(env, [`HADIS_${kind.toUpperCase().replace(/-/g, "_")}_NATS`, "HADIS_NATS"]);
  return found && { user: found.user, pass: found.pass, ...(found.prefix !== "HADIS_NATS" ? { ownRole: true } : {}) };
}

/** `--nats a,b,c` (or `NATS_URL`: `source` names where it came from) → every URL of a cluster. */
export function natsUrls(value: string, source = "--nats"): string | string[] {
  const urls = value
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
  const named = source.startsWith("-") ? `${source} "${value}"` : `${source}=${value}`;
  // (An empty list would quietly become the client library's default server.)
  if (urls.length === 0) throw new ConfigurationError(`${named} names no server`);
  // nats.js reads any scheme as nats:// (foo://bar tried host bar, and said it did not resolve).
  const odd = urls.find((u) => u.includes("://") && !/^(nats|tls):\/\//i.test(u));
  if (odd)
    throw new ConfigurationError(
      `${source.startsWith("-") ? `${source} "${odd}"` : `${source}=${value}: "${odd}"`} is not a NATS URL: nats://host:port, tls://host:port or host:port`,
    );
  return urls.length === 1 ? urls[0] : urls;
}

/** The NATS server a command talks to and where that came from: `--nats`, else `NATS_URL`, else `fallback` (none: undefined). */
export function natsServerOf(
  given: string | undefined,
  env: NodeJS.ProcessEnv,
  fallback?: string,
): { value: string; source: string } | undefined {
  if (given !== undefined) return { value: given, source: "--nats" };
  if (env.NATS_URL) return { value: env.NATS_URL, source: "NATS_URL" }; // (set empty: unset)
  return fallback === undefined ? undefined : { value: fallback, source: "the default" };
}

/**
 * The user a command-line tool connects as: its role's (`HADIS_CLIENT_NATS_*` for `hadis
 * generate`, `HADIS_OBSERVER_NATS_*` for `hadis status`), else `HADIS_NATS_*`, else none. The
 * observer reads replies under its own inbox prefix (ops/nats/accounts.conf); a client under `_INBOX`.
 */
export function toolCredentials(
  env: NodeJS.ProcessEnv,
  role: "client" | "observer",
): { user: string; pass: string; inboxPrefix?: string } | undefined {
  const found = userPair(env, [`HADIS_${role.toUpperCase()}_NATS`, "HADIS_NATS"]);
  return (
    found && {
      user: found.user,
      pass: found.pass,
      ...(role === "observer" && found.prefix !== "HADIS_NATS" ? { inboxPrefix: inboxPrefixOf(role) } : {}),
    }
  );
}

/**
 * TLS of every NATS connection the command makes, from `HADIS_NATS_TLS_CA` (a CA file to trust
 * beyond the system's) and `HADIS_NATS_TLS_CERT` with `HADIS_NATS_TLS_KEY` (a client certificate,
 * for a server whose `tls {}` has `verify: true`); undefined when none is set. A URL needs
 * `tls://` (or a server that requires TLS) for them to be used.
 */
export function natsTlsFromEnv(env: NodeJS.ProcessEnv = process.env): NatsTlsFiles | undefined {
  const files: NatsTlsFiles = {};
  for (const [field, name] of [
    ["caFile", "HADIS_NATS_TLS_CA"],
    ["certFile", "HADIS_NATS_TLS_CERT"],
    ["keyFile", "HADIS_NATS_TLS_KEY"],
  ] as const) {
    const path = env[name];
    if (!path) continue;
    if (!existsSync(path)) throw new ConfigurationError(`${name}=${path}: no such file`);
    files[field] = path;
  }
  if (!files.certFile !== !files.keyFile)
    throw new ConfigurationError(
      `HADIS_NATS_TLS_CERT and HADIS_NATS_TLS_KEY go together: ${files.certFile ? "HADIS_NATS_TLS_KEY" : "HADIS_NATS_TLS_CERT"} is not set`,
    );
  return Object.keys(files).length > 0 ? files : undefined;
}
