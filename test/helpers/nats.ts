/** A real nats-server for one test file (or describe block) and a connection to it. */
import { afterAll, beforeAll } from "vitest";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";

/** The server and connection `useNatsServer` gives: both set before the tests run. */
export interface TestNats {
  server: LocalServer;
  nc: NatsConnection;
}

/** Starts nats-server on a free port before the tests and connects as `name`; closes and stops it after. */
export function useNatsServer(name: string): TestNats {
  const t = {} as TestNats;
  beforeAll(async () => {
    t.server = await startNatsServer();
    t.nc = await connectNats(t.server.url, name);
  });
  afterAll(async () => {
    await t.nc?.close();
    await t.server?.stop();
  });
  return t;
}
