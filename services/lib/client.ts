/** A small client of `hadis.generate`: used by the CLI, the tests and the benchmarks. */
import { fromWireError, HadisError, isWireError } from "../../contracts/errors.ts";
import { decode, encode, encodeJson, parseRaw } from "../../contracts/envelope.ts";
import { GenerateReplySchema, MAX_DEADLINE_MS, type GenerateReply, type GenerateRequest } from "../../contracts/messages.ts";
import { ContentTypes, Headers, subjects as buildSubjects } from "../../contracts/subjects.ts";
import { newHeaders, type Msg, type NatsConnection } from "./nats.ts";

/** Reads a generate reply message: the reply, or the typed error it carries. */
export function readGenerateReply(msg: Msg): GenerateReply {
  const isJson = (msg.headers?.get(Headers.contentType) ?? "").startsWith(ContentTypes.json);
  if (msg.headers?.get(Headers.serviceErrorCode)) {
    const body = parseRaw(msg.data, isJson ? "json" : "msgpack");
    if (isWireError(body)) throw fromWireError(body);
    throw new HadisError("internal", msg.headers.get(Headers.serviceError) || "error reply without body");
  }
  if (isJson) {
    const raw = parseRaw(msg.data, "json") as Record<string, unknown>;
    return decode(GenerateReplySchema, encode({ ...raw, image: Buffer.from(String(raw.image), "base64") }), "generate reply");
  }
  return decode(GenerateReplySchema, msg.data, "generate reply");
}

/**
 * How long a caller waits for the reply to `request`: its deadline and 5 s for the reply to
 * travel. Without one the router applies the SLO in force, which the caller does not know (60 s
 * times the time scale): the longest deadline any router accepts.
 */
export function replyWaitMs(request: Pick<GenerateRequest, "deadlineMs">): number {
  return (request.deadlineMs ?? MAX_DEADLINE_MS) + 5_000;
}

/** Calls `hadis.generate`. */
export class HadisClient {
  private readonly subject: string;
  constructor(private readonly nc: NatsConnection, prefix?: string) {
    this.subject = buildSubjects(prefix).generate;
  }

  /** Sends one request; resolves with the reply or rejects with a HadisError. */
  async generate(request: GenerateRequest, opts: { timeoutMs?: number; json?: boolean } = {}): Promise<GenerateReply> {
    const headers = newHeaders();
    headers.set(Headers.contentType, opts.json ? ContentTypes.json : ContentTypes.msgpack);
    const timeout = opts.timeoutMs ?? replyWaitMs(request);
    let msg: Msg;
    try {
      msg = await this.nc.request(this.subject, opts.json ? encodeJson(request) : encode(request), { timeout, headers });
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      if (/no responders/i.test(message)) throw new HadisError("no_capacity", "no router is serving hadis.generate", {}, { cause: err });
      if (/timeout/i.test(message)) throw new HadisError("deadline_exceeded", `no reply within ${timeout} ms`, {}, { cause: err });
      throw new HadisError("internal", message, {}, { cause: err });
    }
    return readGenerateReply(msg);
  }

  /**
   * Resolves once the system answers a request (a start, a restart, a fail-over), retrying
   * every 200 ms; rejects with the last error after `timeoutMs`.
   */
  async waitUntilServing(timeoutMs = 30_000, attemptMs = 6_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.generate({ prompt: "warm up", deadlineMs: 5_000 }, { timeoutMs: attemptMs });
        return;
      } catch (err) {
        // An answer that waiting cannot change (a refused request, a misconfigured system) is
        // thrown as it came; so is the last error when time runs out, with its code.
        if (err instanceof HadisError && !err.retryable) throw err;
        if (Date.now() > end) {
          if (err instanceof HadisError) throw new HadisError(err.code, `not serving after ${timeoutMs} ms: ${err.message}`, err.details, { cause: err });
          throw new Error(`no reply within ${timeoutMs} ms: ${(err as Error).message}`, { cause: err });
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }
}
