/**
 * How many spans a request makes, by kind, as the tracing bench's load makes them: the services
 * in one process (bench/tracing-child.ts) at zero model latency, 200 closed-loop callers, every span
 * exported over OTLP/HTTP protobuf to a collector here that decodes each export (with the
 * OTLP schema: test/helpers/otlp-decode.ts) and counts spans by the first word of their name.
 * Spans per request are read against the requests' root spans (`hadis.generate`), so exports still
 * in flight at either end of the window do not skew them.
 *
 *   node --import tsx bench/tracing-spans.ts [--seconds 8]
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { startNatsServer } from "../services/nats/server.ts";
import { connectNats } from "../services/nats/connection.ts";
import { HadisClient } from "../services/client/client.ts";
import { r2, writeResult } from "./lib.ts";
import { decodeTraceExport } from "../test/helpers/otlp-decode.ts";
import { ALL_MODES, spawnSwitchableSystem, startLoad, switchTracing } from "./tracing-lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const seconds = Number(args.get("--seconds") ?? 8);

async function main() {
  const byKind = new Map<string, number>();
  let batchLinks = 0;
  let counting = false;
  const collector = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (counting) {
        for (const span of decodeTraceExport(Buffer.concat(chunks))) {
          const kind = span.name.split(" ")[0];
          byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
          if (kind === "batch") batchLinks += span.links.length;
        }
      }
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(collector.address() as AddressInfo).port}/v1/traces`;
  const server = await startNatsServer();
  const nc = await connectNats(server.url, "bench-tracing-spans");
  const child = spawnSwitchableSystem(server.url, []);
  const client = new HadisClient(nc);
  let load: ReturnType<typeof startLoad> | null = null;
  try {
    await client.waitUntilServing(30_000, 2_000);
    load = startLoad(client, 200, 30_000);
    await switchTracing(
      child,
      ALL_MODES.find((m) => m.key === "otlp")!,
      url,
    );
    await new Promise((r) => setTimeout(r, 3_000)); // settled: exports of the switch's moment are past
    counting = true;
    await new Promise((r) => setTimeout(r, seconds * 1_000));
    counting = false;
  } finally {
    await load?.stop();
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await nc.close();
    await server.stop();
    collector.close();
  }
  const roots = byKind.get("hadis.generate") ?? 0;
  const perRequest = Object.fromEntries([...byKind].sort((a, b) => b[1] - a[1]).map(([kind, n]) => [kind, r2(n / Math.max(1, roots))]));
  const total = r2([...byKind.values()].reduce((a, b) => a + b, 0) / Math.max(1, roots));
  const itemsPerBatch = r2(batchLinks / Math.max(1, byKind.get("batch") ?? 0));
  console.table(perRequest);
  console.log(
    `${roots} requests' root spans in ${seconds} s; ${total} spans a request; a batch span links ${itemsPerBatch} items on average`,
  );
  console.log(
    "wrote",
    writeResult("tracing-spans", {
      date: new Date().toISOString(),
      seconds,
      requests: roots,
      spansPerRequest: total,
      perRequest,
      itemsPerBatch,
    }),
  );
}

await main();
