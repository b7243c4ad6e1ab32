import { expect, it } from "vitest";
import { startNatsServer } from "../../services/nats/server.ts";
import { connectNats } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import { decode, encode } from "../../contracts/envelope.ts";
import { RouterStatsSchema, type RouterStats } from "../../contracts/messages.ts";
import { startTestServices } from "../helpers/system.ts";

it("the routers' load reports count every request (not bad input), those of a router's last partial second included", async () => {
  const server = await startNatsServer();
  const system = await startTestServices(server.url);
  const nc = await connectNats(server.url, "test-stats");
  try {
    const reports: RouterStats[] = [];
    nc.subscribe(system.subjects.routerStatsAll, {
      callback: (_e, m) => void reports.push(decode(RouterStatsSchema, m.data, "router stats")),
    });
    await nc.flush();
    // Start right after a report: the requests fall in an interval the timer has not closed when the router stops.
    const seen = reports.length;
    while (reports.length === seen) await new Promise((r) => setTimeout(r, 5));
    const client = new HadisClient(nc);
    const n = 7;
    await Promise.all(Array.from({ length: n }, (_, i) => client.generate({ prompt: `a photo of thing number ${i}`, deadlineMs: 10_000 })));
    // Bad input is no demand: refused at the edge, counted in no arrivals.
    for (const bad of [new Uint8Array([0xc1]), encode({ seed: 3 }), encode({ prompt: "a cat", colour: "red" })])
      await nc.request("hadis.generate", bad, { timeout: 5_000 });
    const stoppedAt = Date.now();
    await system.stop(2_000);
    await nc.flush();
    await new Promise((r) => setTimeout(r, 100));
    const last = reports.at(-1)!;
    expect(last.sentAtMs).toBeGreaterThanOrEqual(stoppedAt);
    expect(reports.reduce((a, r) => a + r.arrivals, 0)).toBe(n);
    expect(reports.reduce((a, r) => a + (r.served ?? 0), 0)).toBe(n);
  } finally {
    await nc.close();
    await server.stop();
  }
});
