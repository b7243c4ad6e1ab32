import { describe, expect, it } from "vitest";
import { credentialsFromEnv, natsUrls } from "../../services/cli/credentials.ts";

describe("credentials from the environment", () => {
  it("per role first, then the process-wide pair, else none", () => {
    const creds = credentialsFromEnv({ HADIS_NATS_USER: "svc", HADIS_NATS_PASS: "p1", HADIS_ROUTER_NATS_USER: "router", HADIS_ROUTER_NATS_PASS: "p2" })!;
    expect(creds("router")).toEqual({ user: "router", pass: "p2", ownRole: true }); // its role's own inboxes
    expect(creds("resource-manager")).toEqual({ user: "svc", pass: "p1" }); // a shared user: the default inboxes
    expect(credentialsFromEnv({ PATH: "/bin" })).toBeUndefined();
    expect(credentialsFromEnv({ HADIS_WORKER_NATS_USER: "w" })!("worker")).toBeUndefined();
  });

  it("splits cluster URLs", () => {
    expect(natsUrls("nats://a:1")).toBe("nats://a:1");
    expect(natsUrls("nats://a:1, nats://b:2,nats://c:3")).toEqual(["nats://a:1", "nats://b:2", "nats://c:3"]);
  });
});
