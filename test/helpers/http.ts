/** HTTP helpers of the gateway tests: JSON Schema validation (Ajv, draft 2020-12) and a Server-Sent Events reader. */
import { Ajv2020 } from "ajv/dist/2020.js";

/** A validator of JSON Schema 2020-12 documents (`format` keywords are annotations here). */
export function jsonSchemaValidator(): Ajv2020 {
  return new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
}

/** One Server-Sent Event as the stream carried it. */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/**
 * Reads Server-Sent Events from a response body until it ends, `stopAfter` events were read, or
 * `signal` aborts (a caller that drops the connection).
 */
export async function readSse(body: ReadableStream<Uint8Array>, stopAfter = Infinity): Promise<SseEvent[]> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const events: SseEvent[] = [];
  let buffer = "";
  try {
    while (events.length < stopAfter) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      for (let cut = buffer.indexOf("\n\n"); cut >= 0 && events.length < stopAfter; cut = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event: SseEvent = { data: "" };
        let isComment = true;
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          isComment = false;
          const at = line.indexOf(":");
          const field = at < 0 ? line : line.slice(0, at);
          const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
          if (field === "data") event.data += (event.data ? "\n" : "") + value;
          else if (field === "id") event.id = value;
          else if (field === "event") event.event = value;
        }
        if (!isComment) events.push(event);
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return events;
}
