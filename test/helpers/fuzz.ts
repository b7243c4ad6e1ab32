/**
 * A seeded generator of malformed payloads for any HADIS subject: random bytes, truncated
 * msgpack, wrong field types, huge fields, deep nesting, wrong protocol versions, unknown fields,
 * non-map values and msgpack extension types. Every payload is invalid for the message schema the
 * template stands for (the template itself is a valid message that is mutated, never sent).
 */
import { mulberry32 } from "../../actors/profile/stats.ts";
import { Packr } from "msgpackr";

const packr = new Packr({ useRecords: false });

/** The kinds of malformation. */
export const FuzzKinds = [
  "randomBytes",
  "truncated",
  "wrongType",
  "missingField",
  "hugeField",
  "deepNesting",
  "wrongVersion",
  "unknownField",
  "notAMap",
  "extType",
  "json",
] as const;
/** One kind of malformation. */
export type FuzzKind = (typeof FuzzKinds)[number];

/** One malformed payload. */
export interface FuzzCase {
  kind: FuzzKind;
  data: Uint8Array;
  /** True when the payload is (broken) JSON, to be sent with `Content-Type: application/json`. */
  json: boolean;
}

/** Deterministic 32-bit PRNG (mulberry32): uniform in [0, 1). */
export const prng = mulberry32;

/** Options of the generator. */
export interface FuzzOptions {
  seed?: number;
  /** Kinds to draw from (default: all but `json`). */
  kinds?: readonly FuzzKind[];
  /** Largest "huge" field, bytes (default 256 KiB). */
  hugeBytes?: number;
}

/** `count` malformed variants of `template` (a valid message of the target subject). */
export function* fuzzPayloads(template: Record<string, unknown>, count: number, opts: FuzzOptions = {}): Generator<FuzzCase> {
  const rand = prng(opts.seed ?? 1);
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  const kinds = opts.kinds ?? FuzzKinds.filter((k) => k !== "json");
  const hugeBytes = opts.hugeBytes ?? 256 * 1024;
  const keys = Object.keys(template);
  const bytes = (n: number) => Uint8Array.from({ length: n }, () => int(256));
  /** A value whose type differs from `value`'s. */
  const wrongTypeFor = (value: unknown): unknown => {
    const candidates: unknown[] = [
      null,
      true,
      -1.5,
      "str",
      [1, "a"],
      { nested: { x: 1 } },
      new Uint8Array([1, 2]),
      Number.NaN,
      -(2 ** 60),
      "",
    ];
    const sameKind = (c: unknown) =>
      typeof c === typeof value &&
      Array.isArray(c) === Array.isArray(value) &&
      c instanceof Uint8Array === value instanceof Uint8Array &&
      (c === null) === (value === null);
    return pick(candidates.filter((c) => !sameKind(c)));
  };
  const nested = (depth: number): unknown => {
    let v: unknown = "leaf";
    for (let i = 0; i < depth; i++) v = rand() < 0.5 ? [v] : { k: v };
    return v;
  };
  for (let i = 0; i < count; i++) {
    const kind = pick(kinds);
    const copy: Record<string, unknown> = { ...template };
    let data: Uint8Array;
    let json = false;
    switch (kind) {
      case "randomBytes":
        // 0xc1 is never valid msgpack: a leading one keeps short random payloads from decoding.
        data = Uint8Array.from([0xc1, ...bytes(int(2048))]);
        if (rand() < 0.3) data = data.subarray(1, 1 + int(4)); // and some tiny ones, possibly empty
        break;
      case "truncated": {
        const full = packr.pack(template);
        data = full.subarray(0, Math.max(1, int(full.length - 1)));
        break;
      }
      case "wrongType": {
        const key = pick(keys);
        copy[key] = wrongTypeFor(template[key]);
        data = packr.pack(copy);
        break;
      }
      case "missingField": {
        const required = keys.filter((k) => k !== "v" && k !== "seed" && k !== "deadlineMs" && k !== "idempotencyKey");
        delete copy[pick(required.length ? required : keys)];
        if (!required.length) copy.unexpected = 1;
        data = packr.pack(copy);
        break;
      }
      case "hugeField": {
        const size = 2048 + int(hugeBytes);
        if (rand() < 0.5) copy[pick(keys)] = "x".repeat(size);
        else copy[`huge_${int(1000)}`] = bytes(size);
        // A huge value in a string field can stay valid (a long prompt is refused for its length,
        // a long request id is not): add an unknown field too so the whole message is invalid.
        copy.oversized = true;
        data = packr.pack(copy);
        break;
      }
      case "deepNesting": {
        copy[rand() < 0.5 ? pick(keys) : "deep"] = nested(100 + int(3000));
        if (!("deep" in copy)) copy.deep = 1;
        try {
          data = packr.pack(copy);
        } catch {
          data = packr.pack({ ...template, deep: nested(500) });
        }
        break;
      }
      case "wrongVersion":
        copy.v = pick([0, 2, 99, -1, "1", 1.5, null, 2 ** 40]);
        data = packr.pack(copy);
        break;
      case "unknownField":
        copy[pick(["colour", "__proto__x", "", "prompt ", "V", "constructor"])] = pick([1, "x", null, [1]]);
        data = packr.pack(copy);
        break;
      case "notAMap":
        data = packr.pack(pick([[1, 2, 3], "a string", 42, null, true, -7.25, new Uint8Array([1, 2, 3]), Object.values(template)]));
        break;
      case "extType": {
        // fixext / ext 8 with random types (including -1, the timestamp ext) and random bodies.
        const body = bytes(1 + int(16));
        const type = pick([-1, -128, 1, 42, 127]);
        data = Uint8Array.from([0x81, 0xa6, ...new TextEncoder().encode("prompt"), 0xc7, body.length, type & 0xff, ...body]);
        break;
      }
      case "json": {
        json = true;
        const text = pick([
          '{"prompt": "a cat",',
          "[1,2,3]",
          '{"prompt": 42}',
          '{"prompt":"a cat","v":2}',
          '{"prompt":"a cat","extra":true}',
          "null",
          '"just a string"',
          `{"prompt":"${"a".repeat(3000)}"}`,
          `{"prompt":"a cat","seed":"seven"}`,
          "\u0000\u0001\u0002",
          `${"[".repeat(5000)}${"]".repeat(5000)}`,
        ]);
        data = new TextEncoder().encode(text);
        break;
      }
    }
    yield { kind, data, json };
  }
}

/** Runs `send` over `items` with at most `concurrency` calls in flight. */
export async function pooled<T>(items: Iterable<T>, concurrency: number, send: (item: T) => Promise<void>): Promise<void> {
  const it = items[Symbol.iterator]();
  const lane = async () => {
    for (let next = it.next(); !next.done; next = it.next()) await send(next.value);
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
}
