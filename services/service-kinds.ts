/** The four service kinds, apart from `system.ts` so that a tool can name them without loading every service. */

/** The four service kinds. */
export const SERVICE_KINDS = ["router", "worker", "discriminator", "resource-manager"] as const;
/** One service kind. */
export type ServiceKind = (typeof SERVICE_KINDS)[number];
