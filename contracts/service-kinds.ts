/** The service kinds: what a `hadis serve` names, what a NATS role is for (ops/nats/accounts.conf). */

/** The four service kinds. */
export const SERVICE_KINDS = ["router", "worker", "discriminator", "resource-manager"] as const;
/** One service kind. */
export type ServiceKind = (typeof SERVICE_KINDS)[number];
