/**
 * TCP proxies to a nats-server, one per name, in a process of their own so that forwarding is not
 * delayed by the bench's own work (bytes a busy proxy has not yet read when it cuts are lost with
 * the cut: more than a real network would lose). Run by `bench/chaos.ts` over Node's IPC:
 *
 *   node --import tsx bench/proxies.ts <server port> <name>...
 *
 * sends `{ urls: { name: url } }` once listening, and cuts `name`'s connections for `ms` on each
 * `{ cut: name, ms }`; exits when its parent goes.
 */
import { startProxy } from "../test/helpers/proxy.ts";

const [port, ...names] = process.argv.slice(2);
const proxies = new Map(await Promise.all(names.map(async (name) => [name, await startProxy(Number(port))] as const)));
process.on("message", (m: { cut: string; ms: number }) => proxies.get(m.cut)?.cut(m.ms));
process.on("disconnect", () => process.exit(0));
process.send!({ urls: Object.fromEntries([...proxies].map(([name, p]) => [name, p.url])) });
