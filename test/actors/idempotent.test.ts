import { describe, expect, it } from "vitest";
import {
  answerableUntil,
  claimKey,
  fingerprintOf,
  isKeyed,
  keyedRequestId,
  keyedSeed,
  resultKey,
} from "../../actors/request/idempotent.ts";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";

describe("keyed requests", () => {
  it("derive the same request id and seed from the same key and request on any router, different ones from other keys or requests", () => {
    const cat = fingerprintOf("a cat", undefined);
    expect(keyedRequestId("order-42", cat)).toBe(keyedRequestId("order-42", fingerprintOf("a cat", undefined)));
    expect(keyedRequestId("order-42", cat)).not.toBe(keyedRequestId("order-43", cat));
    // The key reused for another prompt or seed names other work (its stored images are not this one's).
    expect(keyedRequestId("order-42", cat)).not.toBe(keyedRequestId("order-42", fingerprintOf("a dog", undefined)));
    expect(keyedRequestId("order-42", cat)).not.toBe(keyedRequestId("order-42", fingerprintOf("a cat", 7)));
    // ...but the claim that refuses such reuse is the key's alone.
    expect(claimKey("order-42")).toBe(claimKey("order-42"));
    expect(claimKey("order-42")).not.toBe(claimKey("order-43"));
    expect(claimKey("order-42")).toMatch(/^c-[0-9a-f]{32}\.claim$/);
    expect(keyedSeed("order-42")).toBe(keyedSeed("order-42"));
    expect(keyedSeed("order-42")).not.toBe(keyedSeed("order-43"));
    expect(keyedSeed("x")).toBeLessThanOrEqual(0xffffffff);
    expect(isKeyed(keyedRequestId("a", cat))).toBe(true);
    expect(isKeyed("Xy12abc")).toBe(false);
  });

  it("name results with valid KV keys and a subject-safe request id", () => {
    const id = keyedRequestId("any key: with spaces/and.dots", fingerprintOf("a cat", undefined));
    expect(resultKey(id, "heavy")).toMatch(/^[-/_=.a-zA-Z0-9]+$/);
    expect(() => subjects().results(id)).not.toThrow();
  });

  it("read an earlier attempt's item as answerable until its deadline: gone never, unsure always", () => {
    const item = {
      v: PROTOCOL_VERSION,
      requestId: "r",
      stage: "light",
      prompt: "a cat",
      seed: 1,
      model: "m",
      replyTo: "x",
      enqueuedAtMs: 1,
      deadlineAtMs: 5_000,
      planEpoch: 1,
    };
    expect(answerableUntil(encode(item))).toBe(5_000);
    expect(answerableUntil(null)).toBe(-Infinity);
    expect(answerableUntil(undefined)).toBe(Infinity);
    expect(answerableUntil(new Uint8Array([0xc1]))).toBe(Infinity);
  });
});
