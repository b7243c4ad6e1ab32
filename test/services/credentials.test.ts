import { describe, expect, it } from "vitest";
import { credentialsFromEnv, natsUrls } from "../../services/cli/credentials.ts";

describe("credentials from the environment", () => {
  it("per role first, then the process-wide pair, else none", () => {
    const creds = credentialsFromEnv({
      HADIS_NATS_USER: "svc",
      HADIS_NATS_PASS: "p1",
      HADIS_ROUTER_NATS_USER: "router",
      HADIS_ROUTER_NATS_PASS: "p2",
    })!;
    expect(creds("router")).toEqual({ user: "router", pass: "p2", ownRole: true }); // its role's own inboxes
    expect(creds("resource-manager")).toEqual({ user: "svc", pass: "p1" }); // a shared user: the default inboxes
    expect(credentialsFromEnv({ PATH: "/bin" })).toBeUndefined();
  });

  it("refuses a half-set pair before anything connects, naming the missing variable (it used to connect without credentials, or pair a role's user with the shared password)", () => {
    expect(() => credentialsFromEnv({ HADIS_WORKER_NATS_USER: "w" })).toThrow(
      "HADIS_WORKER_NATS_USER and HADIS_WORKER_NATS_PASS go together: HADIS_WORKER_NATS_PASS is not set",
    );
    expect(() => credentialsFromEnv({ HADIS_NATS_PASS: "p" })).toThrow("HADIS_NATS_USER is not set");
    expect(() => credentialsFromEnv({ HADIS_ROUTER_NATS_USER: "router", HADIS_NATS_USER: "svc", HADIS_NATS_PASS: "p1" })).toThrow(
      "HADIS_ROUTER_NATS_PASS is not set",
    );
  });

  it("splits cluster URLs", () => {
    expect(natsUrls("nats://a:1")).toBe("nats://a:1");
    expect(natsUrls("nats://a:1, nats://b:2,nats://c:3")).toEqual(["nats://a:1", "nats://b:2", "nats://c:3"]);
    // An empty list is refused: the client library would connect to its default server instead.
    expect(() => natsUrls(" , ")).toThrow('--nats " , " names no server');
    // Another scheme is a mistake (it was read as nats:// and failed as a host that does not resolve).
    expect(() => natsUrls("nats://a:1,foo://bar")).toThrow(
      '--nats "foo://bar" is not a NATS URL: nats://host:port, tls://host:port or host:port',
    );
    expect(natsUrls("tls://a:1,b:2")).toEqual(["tls://a:1", "b:2"]);
  });
});
