/** A TCP proxy in front of a NATS server, to cut one service's connection while the others keep theirs. */
import { connect, createServer, type Socket } from "node:net";

/** A running proxy. */
export interface Proxy {
  /** `nats://127.0.0.1:<port>` of the proxy. */
  url: string;
  /** Drops every connection through it and refuses new ones for `ms`. */
  cut(ms: number): void;
  /**
   * From now until the next cut, drops what its clients send instead of passing it on (as a
   * network that has failed, before either end notices).
   */
  swallow(): void;
  close(): Promise<void>;
}

/** Forwards 127.0.0.1:<free port> to 127.0.0.1:`targetPort`. */
export async function startProxy(targetPort: number): Promise<Proxy> {
  const sockets = new Set<Socket>();
  let refusingUntil = 0;
  let swallowing = false;
  const server = createServer((client) => {
    if (Date.now() < refusingUntil) return void client.destroy();
    const upstream = connect(targetPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => undefined);
    }
    client.on("data", (data: Buffer) => void (swallowing || upstream.write(data)));
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `nats://127.0.0.1:${port}`,
    cut(ms) {
      refusingUntil = Date.now() + ms;
      swallowing = false;
      for (const s of sockets) s.destroy();
    },
    swallow() {
      swallowing = true;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
