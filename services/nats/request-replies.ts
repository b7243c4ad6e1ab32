/**
 * A request answered by several messages (a preview, then the final reply): the caller holds an
 * inbox of its own, publishes with it as the reply subject and reads until the message that ends
 * the answer. `nc.request` would take the first message only; nats.js's `requestMany` ends on a
 * count, a timer or an empty message, none of which a preview-aware reply is.
 */
import { inboxPrefix, newInbox, watchConnection, type Msg, type MsgHdrs, type NatsConnection } from "./connection.ts";
import type { RequestAttempt } from "./connection.ts";

/** How a multi-message answer is read: which message ends it, and who hears the ones before. */
export interface RepliesReading {
  /** True for the message that ends the answer (an error reply included). */
  isLast(msg: Msg): boolean;
  /** Hears each message before the last, in order. */
  onEarlier(msg: Msg): void;
}

/** The server's "no responders" status: an empty message with status 503 on the inbox. */
function isNoResponders(msg: Msg): boolean {
  return msg.data.length === 0 && msg.headers?.code === 503;
}

/**
 * Sends one request and reads its answer to the end: resolves with the last message as
 * `requestAttempt` does with the only one (a "timeout" error after `timeout` ms, "no responders"
 * when nobody serves the subject; with `endOnDrop`, "dropped" when the connection drops first).
 * The inbox is dropped once the answer ends, however it ends.
 */
export function requestReplies(
  nc: NatsConnection,
  subject: string,
  data: Uint8Array,
  opts: { timeout: number; headers?: MsgHdrs },
  reading: RepliesReading,
  endOnDrop: boolean,
): Promise<RequestAttempt> {
  return new Promise<RequestAttempt>((resolve) => {
    let dropped = false;
    let ended = false;
    const inbox = newInbox(inboxPrefix(nc));
    const end = (attempt: RequestAttempt) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      forget();
      sub.unsubscribe();
      resolve(attempt);
    };
    const sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        if (err) return end({ err, dropped });
        if (isNoResponders(msg)) return end({ err: new Error(`no responders on ${subject}`), dropped });
        if (reading.isLast(msg)) return end({ msg });
        reading.onEarlier(msg);
      },
    });
    const timer = setTimeout(() => end({ err: new Error(`timeout: no final reply within ${opts.timeout} ms`), dropped }), opts.timeout);
    const forget = watchConnection(nc).onNextDrop(() => {
      dropped = true;
      if (endOnDrop) end("dropped");
    });
    try {
      nc.publish(subject, data, { reply: inbox, ...(opts.headers ? { headers: opts.headers } : {}) });
    } catch (err) {
      end({ err, dropped });
    }
  });
}
