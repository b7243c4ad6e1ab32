/**
 * A NATS client written against the protocol text, as a client we did not write would speak it:
 * header names go out byte for byte as given (nats.js would keep them too, but this proves what
 * reaches the server), and replies come back as raw bytes.
 */
import { connect, type Socket } from "node:net";

/** One message received (`MSG` or `HMSG`): raw header block and payload. */
export interface RawMessage {
  subject: string;
  /** Header lines after `NATS/1.0`, as sent (names in their own case); empty for a `MSG`. */
  headers: [string, string][];
  data: Buffer;
}

/** A connection speaking the NATS protocol over a plain socket. */
export class RawNatsClient {
  private buffer = Buffer.alloc(0);
  private waiters = new Map<string, { resolve: (m: RawMessage) => void; reject: (err: Error) => void }>();
  private sid = 0;
  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.parse();
    });
  }

  /** Connects to `nats://host:port` and sends CONNECT with headers on. */
  static async open(url: string): Promise<RawNatsClient> {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const client = new RawNatsClient(socket);
    socket.write(
      `CONNECT ${JSON.stringify({ verbose: false, pedantic: false, headers: true, no_responders: true, protocol: 1, name: "raw-test-client" })}\r\nPING\r\n`,
    );
    return client;
  }

  /** Sends `data` to `subject` with `headers` (names exactly as given) and waits for one reply. */
  async request(subject: string, data: Uint8Array, headers: [string, string][], timeoutMs: number): Promise<RawMessage> {
    const inbox = `_INBOX.raw.${++this.sid}`;
    const sid = String(this.sid);
    const reply = new Promise<RawMessage>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no reply on ${subject} within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.set(sid, { resolve: (m) => (clearTimeout(timer), resolve(m)), reject: (err) => (clearTimeout(timer), reject(err)) });
    });
    this.socket.write(`SUB ${inbox} ${sid}\r\nUNSUB ${sid} 1\r\n`);
    if (headers.length === 0) {
      this.socket.write(Buffer.concat([Buffer.from(`PUB ${subject} ${inbox} ${data.byteLength}\r\n`), data, Buffer.from("\r\n")]));
    } else {
      const block = Buffer.from(`NATS/1.0\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`);
      this.socket.write(
        Buffer.concat([
          Buffer.from(`HPUB ${subject} ${inbox} ${block.byteLength} ${block.byteLength + data.byteLength}\r\n`),
          block,
          data,
          Buffer.from("\r\n"),
        ]),
      );
    }
    return reply;
  }

  /** Closes the socket. */
  close(): void {
    this.socket.destroy();
  }

  private parse(): void {
    for (;;) {
      const eol = this.buffer.indexOf("\r\n");
      if (eol < 0) return;
      const line = this.buffer.subarray(0, eol).toString("latin1");
      const [op, ...args] = line.split(" ");
      if (op === "MSG" || op === "HMSG") {
        // MSG <subject> <sid> [reply] <bytes>; HMSG <subject> <sid> [reply] <header bytes> <total bytes>
        const total = Number(args[args.length - 1]);
        const headerBytes = op === "HMSG" ? Number(args[args.length - 2]) : 0;
        if (this.buffer.length < eol + 2 + total + 2) return; // the payload has not all come yet
        const body = this.buffer.subarray(eol + 2, eol + 2 + total);
        const headers = body
          .subarray(0, headerBytes)
          .toString("latin1")
          .split("\r\n")
          .slice(1)
          .filter(Boolean)
          .map((h) => {
            const i = h.indexOf(":");
            return [h.slice(0, i), h.slice(i + 1).trim()] as [string, string];
          });
        this.buffer = this.buffer.subarray(eol + 2 + total + 2);
        this.waiters.get(args[1])?.resolve({ subject: args[0], headers, data: Buffer.from(body.subarray(headerBytes)) });
        this.waiters.delete(args[1]);
        continue;
      }
      this.buffer = this.buffer.subarray(eol + 2);
      if (op === "PING") this.socket.write("PONG\r\n");
      if (op === "-ERR") {
        for (const w of this.waiters.values()) w.reject(new Error(`server error: ${line}`));
        this.waiters.clear();
      }
    }
  }
}

/** The value of a header in a raw message, its name matched in any case. */
export function rawHeader(m: RawMessage, name: string): string | undefined {
  return m.headers.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
}
