import { describe, expect, it } from "vitest";
import { isKeyed, keyedRequestId, keyedSeed, resultKey } from "../../actors/request/idempotent.ts";
import { subjects } from "../../contracts/subjects.ts";

describe("keyed requests", () => {
  it("derive the same request id and seed from the same key on any router, different ones from other keys", () => {
    expect(keyedRequestId("order-42")).toBe(keyedRequestId("order-42"));
    expect(keyedRequestId("order-42")).not.toBe(keyedRequestId("order-43"));
    expect(keyedSeed("order-42")).toBe(keyedSeed("order-42"));
    expect(keyedSeed("order-42")).not.toBe(keyedSeed("order-43"));
    expect(keyedSeed("x")).toBeLessThanOrEqual(0xffffffff);
    expect(isKeyed(keyedRequestId("a"))).toBe(true);
    expect(isKeyed("Xy12abc")).toBe(false);
  });

  it("name results with valid KV keys and a subject-safe request id", () => {
    const id = keyedRequestId("any key: with spaces/and.dots");
    expect(resultKey(id, "heavy")).toMatch(/^[-/_=.a-zA-Z0-9]+$/);
    expect(() => subjects().results(id)).not.toThrow();
  });
});
