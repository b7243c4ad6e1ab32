/**
 * NATS credentials from the environment, never from files in the repository:
 * `HADIS_<ROLE>_NATS_USER` / `_PASS` per role (ROUTER, WORKER, DISCRIMINATOR, RESOURCE_MANAGER),
 * else `HADIS_NATS_USER` / `HADIS_NATS_PASS` for every service of this process.
 */
import { inboxPrefixOf } from "../../contracts/subjects.ts";
import type { NatsCredentials, ServiceKind } from "../system.ts";

/** The credentials of a service kind, or undefined (no authentication). */
export function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): ((kind: ServiceKind) => NatsCredentials | undefined) | undefined {
  const any = Object.keys(env).some((k) => /^HADIS_([A-Z_]+_)?NATS_USER$/.test(k));
  if (!any) return undefined;
  return (kind) => {
    const role = kind.toUpperCase().replace(/-/g, "_");
    const own = env[`HADIS_${role}_NATS_USER`] !== undefined;
    const user = env[`HADIS_${role}_NATS_USER`] ?? env.HADIS_NATS_USER;
    const pass = env[`HADIS_${role}_NATS_PASS`] ?? env.HADIS_NATS_PASS;
    return user && pass ? { user, pass, ...(own ? { ownRole: true } : {}) } : undefined;
  };
}

/** `--nats a,b,c` → every URL of a cluster. */
export function natsUrls(value: string): string | string[] {
  const urls = value.split(",").map((u) => u.trim()).filter(Boolean);
  return urls.length === 1 ? urls[0] : urls;
}

/**
 * The user a command-line tool connects as: its role's (`HADIS_CLIENT_NATS_*` for `hadis
 * generate`, `HADIS_OBSERVER_NATS_*` for `hadis status`), else `HADIS_NATS_*`, else none. The
 * observer reads replies under its own inbox prefix (ops/nats/accounts.conf); a client under `_INBOX`.
 */
export function toolCredentials(env: NodeJS.ProcessEnv, role: "client" | "observer"): { user: string; pass: string; inboxPrefix?: string } | undefined {
  for (const prefix of [`HADIS_${role.toUpperCase()}_NATS`, "HADIS_NATS"]) {
    const user = env[`${prefix}_USER`];
    const pass = env[`${prefix}_PASS`];
    if (user === undefined && pass === undefined) continue;
    if (!user || !pass) throw new Error(`${prefix}_USER and ${prefix}_PASS go together: ${user ? `${prefix}_PASS` : `${prefix}_USER`} is not set`);
    return { user, pass, ...(role === "observer" && prefix !== "HADIS_NATS" ? { inboxPrefix: inboxPrefixOf(role) } : {}) };
  }
  return undefined;
}
