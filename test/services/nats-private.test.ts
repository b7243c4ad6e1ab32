/**
 * The two private fields of nats.js this project reads (services/nats/private.ts), checked
 * against a real nats-server: an upgrade that renames or drops them fails here, not quietly in
 * production (a `connected` read as always true would publish into a dropped connection).
 */
import { afterAll, describe, expect, it } from "vitest";
import { connectNats } from "../../services/nats/connection.ts";
import { connectedNow, connectionInboxPrefix } from "../../services/nats/private.ts";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { waitFor } from "../helpers/processes.ts";

const servers: LocalServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
});

describe("nats.js internals read by services/nats/private.ts", () => {
  it("the connected flag: true while up, false from the server's loss until the reconnect, false once closed", async () => {
    const first = await startNatsServer();
    servers.push(first);
    const nc = await connectNats(first.url, "nats-private-test");
    try {
      expect(connectedNow(nc)).toBe(true);
      first.kill("SIGKILL");
      await waitFor(() => !connectedNow(nc), 10_000, "the flag to drop");
      const again = await startNatsServer({ port: first.port });
      servers.push(again);
      await waitFor(() => connectedNow(nc), 15_000, "the flag to come back");
    } finally {
      await nc.close();
    }
    expect(connectedNow(nc)).toBe(false);
  }, 40_000);

  it("the inbox prefix a connection was opened with", async () => {
    const server = await startNatsServer();
    servers.push(server);
    const plain = await connectNats(server.url, "nats-private-plain");
    const prefixed = await connectNats(server.url, "nats-private-prefixed", { inboxPrefix: "_INBOX_role" });
    try {
      expect(connectionInboxPrefix(plain)).toBeUndefined();
      expect(connectionInboxPrefix(prefixed)).toBe("_INBOX_role");
    } finally {
      await plain.close();
      await prefixed.close();
    }
  });

  it("throws, naming the module, on a connection without the fields it reads", () => {
    const alien = { isClosed: () => false } as never;
    expect(() => connectedNow(alien)).toThrow(/services\/nats\/private\.ts/);
    expect(() => connectionInboxPrefix(alien)).toThrow(/services\/nats\/private\.ts/);
  });
});
