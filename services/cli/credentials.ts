/**
 * NATS credentials from the environment, never from files in the repository:
 * `HADIS_<ROLE>_NATS_USER` / `_PASS` per role (ROUTER, WORKER, DISCRIMINATOR, RESOURCE_MANAGER),
 * else `HADIS_NATS_USER` / `HADIS_NATS_PASS` for every service of this process.
 */
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
