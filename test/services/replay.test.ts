/**
 * What a connection writes just before it drops is lost with the socket (here: a proxy that
 * swallows what the responder sends, then cuts it off, as a failed network does before either
 * end notices). A reply sent with `sendKept` (or `sendWhenUp`) goes again
 * once reconnected; one sent longer than `REPLAY_MS` before the drop does not. What is remembered
 * is let go once `REPLAY_MS` has passed, whether or not anything is sent after it.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  connectNats,
  REPLAY_MS,
  sendKept,
  sendWhenUp,
  watchConnection,
  type Msg,
  type NatsConnection,
} from "../../services/nats/connection.ts";
import { startProxy, type Proxy } from "../helpers/proxy.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { waitFor } from "../helpers/processes.ts";

const t = useNatsServer("test-replay");
let proxy: Proxy | undefined;
let responder: NatsConnection | undefined;

afterEach(async () => {
  await responder?.close();
  await proxy?.close();
});

/**
 * Asks `subject` from the test's own connection; the responder, behind a proxy, answers with
 * `answer` while the proxy swallows what it sends, and is cut off `cutAfterMs` later. Resolves
 * with the reply's text, or null when none came within 4 s.
 */
async function answerBeforeDrop(
  subject: string,
  answer: (nc: NatsConnection, msg: Msg) => void,
  cutAfterMs: number,
): Promise<string | null> {
  proxy = await startProxy(t.server.port);
  const nc = (responder = await connectNats(proxy.url, "responder"));
  let asked: Msg | undefined;
  nc.subscribe(subject, { callback: (_err, msg) => void (asked = msg) });
  await nc.flush();
  const reply = t.nc.request(subject, new TextEncoder().encode("?"), { timeout: 4_000 }).then(
    (m) => new TextDecoder().decode(m.data),
    () => null,
  );
  await waitFor(() => asked !== undefined, 2_000, "the request at the responder");
  proxy.swallow();
  answer(nc, asked!);
  await new Promise((r) => setTimeout(r, cutAfterMs));
  proxy.cut(300);
  await waitFor(() => !watchConnection(nc).connected, 2_000, "the responder's drop seen");
  return reply;
}

describe("sends lost with a dropped socket", () => {
  it("a reply sent with sendKept goes again once reconnected", async () => {
    const reply = await answerBeforeDrop(
      "replay.a",
      (nc, msg) => sendKept(nc, () => void msg.respond(new TextEncoder().encode("yes"))),
      100,
    );
    expect(reply).toBe("yes");
  }, 10_000);

  it("so does one sent with sendWhenUp (a worker's result, its acknowledgement)", async () => {
    const reply = await answerBeforeDrop("replay.b", (nc, msg) => sendWhenUp(nc, () => msg.respond(new TextEncoder().encode("done"))), 100);
    expect(reply).toBe("done");
  }, 10_000);

  it("one sent longer than REPLAY_MS before the drop is not sent again", async () => {
    const reply = await answerBeforeDrop(
      "replay.c",
      (nc, msg) => sendWhenUp(nc, () => msg.respond(new TextEncoder().encode("late"))),
      REPLAY_MS + 300,
    );
    expect(reply).toBeNull();
  }, 10_000);

  it("lets go of a remembered send once REPLAY_MS has passed, with no send after it", async () => {
    const nc = (responder = await connectNats(t.server.url, "idle"));
    const watch = watchConnection(nc);
    const sentAt = performance.now();
    // An image-sized reply, the last thing an idle router sent: it must not be held until the next.
    sendKept(nc, () => nc.publish("replay.idle", new Uint8Array(1 << 20)));
    expect(watch.remembered).toBe(1);
    await waitFor(() => watch.remembered === 0, REPLAY_MS + 1_000, "the remembered send let go");
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(REPLAY_MS);
  }, 10_000);
});
