/** Reading a work item at the queue: typed, or refused with the reason and, when it reads, the router's address. */
import { describe, expect, it } from "vitest";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { readWorkItem } from "../../contracts/work-items.ts";

const good = {
  v: PROTOCOL_VERSION,
  requestId: "r1",
  stage: "light",
  prompt: "a cat",
  seed: 3,
  model: "m1",
  replyTo: "hadis.result.r",
  enqueuedAtMs: 1,
  deadlineAtMs: 2,
  planEpoch: 4,
};

describe("readWorkItem", () => {
  it("reads a whole item as it was sent", () => {
    expect(readWorkItem(encode(good))).toEqual({ item: good });
  });

  it("refuses what is not msgpack, with no address to answer", () => {
    const read = readWorkItem(new Uint8Array([0xc1, 0xc1]));
    expect("refused" in read && [read.refused.error.code, read.refused.address]).toEqual(["malformed_payload", null]);
  });

  it("refuses an item with a field wrong and gives its router's address when that much reads", () => {
    const read = readWorkItem(encode({ ...good, seed: "one", extra: true }));
    expect("refused" in read && read.refused.address).toEqual({ requestId: "r1", stage: "light", model: "m1", replyTo: "hadis.result.r" });
    expect("refused" in read && read.refused.error.message).toMatch(/^work item: /);
  });

  it("refuses a reply subject no result could be published to, and gives no address (it would not take a reply either)", () => {
    const read = readWorkItem(encode({ ...good, replyTo: "x y" }));
    expect("refused" in read && [read.refused.error.code, read.refused.address]).toEqual(["invalid_request", null]);
  });
});
