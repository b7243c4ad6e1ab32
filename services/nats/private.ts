/**
 * The two things this project reads from nats.js that its public API does not offer, in one
 * place: whether a connection is up at this moment (the protocol's own flag: what is published
 * while it is false is dropped by the library, and the status events arrive a turn of the event
 * loop late) and the inbox prefix a connection was opened with (a pull's inbox must be under it
 * for a role's permissions). Both read nats.js's private fields; `nats-private.test.ts` checks
 * them against a real server, and a shape this module does not recognise throws at once instead
 * of answering wrongly.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { DependencyError } from "../../contracts/errors.ts";

/** The private fields read here, as nats.js 3.4 has them. */
interface ConnectionInternals {
  protocol?: { connected?: unknown };
  options?: { inboxPrefix?: unknown };
}

function internals(nc: NatsConnection): ConnectionInternals {
  return nc as unknown as ConnectionInternals;
}

/** True while `nc`'s socket is up (false from a drop until the reconnect), from nats.js's own flag. */
export function connectedNow(nc: NatsConnection): boolean {
  if (nc.isClosed()) return false;
  const flag = internals(nc).protocol?.connected;
  if (typeof flag !== "boolean")
    throw new DependencyError(
      "nats.js changed: its connection no longer has protocol.connected (services/nats/private.ts reads it); check the upgrade",
    );
  return flag;
}

/** The `inboxPrefix` `nc` was opened with, undefined for the library's default. */
export function connectionInboxPrefix(nc: NatsConnection): string | undefined {
  const options = internals(nc).options;
  if (typeof options !== "object" || options === null)
    throw new DependencyError(
      "nats.js changed: its connection no longer has options (services/nats/private.ts reads them); check the upgrade",
    );
  return typeof options.inboxPrefix === "string" ? options.inboxPrefix : undefined;
}
