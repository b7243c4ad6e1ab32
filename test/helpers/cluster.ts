/**
 * A 3-node JetStream cluster on loopback ports, each node a `nats-server` child with its own
 * store folder, monitoring port and `server_name` (the test twin of ops/nats/cluster-node*.conf).
 */
import { freePort, startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats } from "../../services/nats/connection.ts";
import { jetstreamManager, StorageType } from "@nats-io/jetstream";

/** One node of the cluster. */
export interface ClusterNode {
  name: string;
  server: LocalServer;
  clusterPort: number;
  monitorPort: number;
  /** The node's log since start. */
  log(): string;
}

/** A running cluster. */
export interface LocalCluster {
  nodes: ClusterNode[];
  /** Client URLs of every node (pass them all: clients fail over between them). */
  urls: string[];
  /** Names of the client connections on a node (from its `/connz` monitoring endpoint). */
  connectionNames(node: ClusterNode): Promise<string[]>;
  stop(): Promise<void>;
}

/** The cluster block of one node: listens on its route port, routes to every node. */
export function clusterConfig(name: string, clusterPort: number, monitorPort: number, routePorts: number[], extra = ""): string {
  return [
    `http: "127.0.0.1:${monitorPort}"`,
    `cluster {`,
    `  name: "hadis"`,
    `  listen: "127.0.0.1:${clusterPort}"`,
    `  routes: [${routePorts.map((p) => `"nats-route://127.0.0.1:${p}"`).join(", ")}]`,
    `}`,
    extra,
  ].join("\n");
}

/** Starts three nodes and waits until JetStream can place a 3-replica stream (every peer known). */
export async function startCluster(
  opts: { extraConfig?: string; env?: Record<string, string>; connect?: Record<string, unknown> } = {},
): Promise<LocalCluster> {
  const names = ["n1", "n2", "n3"];
  const clusterPorts = [await freePort(), await freePort(), await freePort()];
  const monitorPorts = [await freePort(), await freePort(), await freePort()];
  const nodes = await Promise.all(
    names.map(async (name, i) => {
      let log = "";
      const server = await startNatsServer({
        serverName: name,
        env: opts.env,
        extraConfig: clusterConfig(name, clusterPorts[i], monitorPorts[i], clusterPorts, opts.extraConfig),
        onLog: (text) => (log += text),
      });
      return { name, clusterPort: clusterPorts[i], monitorPort: monitorPorts[i], server, log: () => log };
    }),
  );
  const urls = nodes.map((n) => n.server.url);
  const cluster: LocalCluster = {
    nodes,
    urls,
    async connectionNames(node) {
      const res = await fetch(`http://127.0.0.1:${node.monitorPort}/connz?limit=1024`);
      const body = (await res.json()) as { connections?: { name?: string }[] };
      return (body.connections ?? []).map((c) => c.name ?? "");
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.server.stop()));
    },
  };
  const nc = await connectNats(urls, "cluster-probe", opts.connect ?? {});
  try {
    const end = Date.now() + 30_000;
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc, { timeout: 2_000 });
        await jsm.streams.add({ name: "CLUSTER_PROBE", subjects: ["cluster.probe"], num_replicas: 3, storage: StorageType.Memory });
        await jsm.streams.delete("CLUSTER_PROBE");
        break;
      } catch (err) {
        if (Date.now() > end) throw new Error(`JetStream cluster not ready within 30 s: ${(err as Error).message}`, { cause: err });
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } catch (err) {
    await nc.close();
    await cluster.stop();
    throw err;
  }
  await nc.close();
  return cluster;
}
