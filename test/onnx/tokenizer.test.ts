import { describe, expect, it } from "vitest";
import { ClipTokenizer, bytesToUnicode, padTokenFromConfig } from "../../actors/diffusion/tokenizer.ts";
import { tinyClipVocab } from "../../tools/make-tiny-models.ts";
import { METASPACE, UnigramTokenizer, unigramFromJson } from "../../actors/diffusion/unigram.ts";

const { vocab, merges } = tinyClipVocab();
const sd15 = new ClipTokenizer(vocab, merges);
const sd2 = new ClipTokenizer(vocab, merges, { padToken: "!" });

describe("ClipTokenizer on the tiny CLIP-layout vocabulary", () => {
  // Published ids of the real openai/clip-vit-large-patch14 tokenizer; the tiny vocab keeps
  // the byte symbols and these whole words at their real ids.
  it("reproduces published CLIP ids", () => {
    expect(sd15.encode("a photo of a cat")).toEqual([49406, 320, 1125, 539, 320, 2368, 49407]);
    expect(sd15.encode("Hello, world!")).toEqual([49406, 3306, 267, 1002, 256, 49407]);
    expect(sd15.encode("A PHOTO of  a Cat!")).toEqual([49406, 320, 1125, 539, 320, 2368, 256, 49407]);
    expect(sd15.encode("")).toEqual([49406, 49407]);
  });

  it("cleans whitespace and case", () => {
    expect(sd15.encode("    a    photo  of\n a CaT    ")).toEqual(sd15.encode("a photo of a cat"));
  });

  it("splits contractions, single digits and non-ASCII bytes (hand-computed from the byte layout)", () => {
    // d=67 o=78 n</w>=333 | '=6 t</w>=339
    expect(sd15.encodeRaw("don't")).toEqual([67, 78, 333, 6, 339]);
    // each digit is its own pre-token: 4</w>=275, 2</w>=273
    expect(sd15.encodeRaw("42")).toEqual([275, 273]);
    // é = bytes C3 A9 → byte symbols 127 and 102, the last with </w> (358)
    expect(sd15.encodeRaw("é")).toEqual([127, 358]);
  });

  it("pads with eos for SD 1.x and with ! (id 0) for SD 2.x / SDXL encoder 2", () => {
    const a = sd15.encodePadded("a cat");
    expect(a).toHaveLength(77);
    expect(a.slice(0, 4)).toEqual([49406, 320, 2368, 49407]);
    expect(a.slice(4).every((id) => id === 49407)).toBe(true);
    const b = sd2.encodePadded("a cat");
    expect(b.slice(0, 4)).toEqual([49406, 320, 2368, 49407]);
    expect(b.slice(4).every((id) => id === 0)).toBe(true);
  });

  it("truncates to 77 keeping bos and eos", () => {
    const ids = sd15.encodePadded("a ".repeat(100));
    expect(ids).toHaveLength(77);
    expect(ids[0]).toBe(49406);
    expect(ids[76]).toBe(49407);
    expect(ids.slice(1, 76).every((id) => id === 320)).toBe(true);
  });

  it("caches ordinary words only, and stops at the length the encoding keeps", () => {
    const t = new ClipTokenizer(vocab, merges);
    const cache = (t as unknown as { cache: Map<string, number[]> }).cache;
    const junk = "q".repeat(1_000); // a prompt's worth of letters is one word
    const ids = t.encode(`a photo of ${junk}`);
    expect(ids).toHaveLength(77); // truncated as before
    expect(cache.has("photo")).toBe(true);
    expect(cache.has(junk)).toBe(false); // not kept: 10,000 of those would hold tens of MB
    // What comes after 75 tokens is never merged: the words past the cut are not even looked at.
    t.encode(`${"a ".repeat(80)}zebra`);
    expect(cache.has("zebra")).toBe(false);
    expect(t.encode(`${"a ".repeat(80)}zebra`)).toEqual(t.encode("a ".repeat(80)));
  });

  it("reads the pad token from tokenizer_config.json forms", () => {
    expect(padTokenFromConfig({ pad_token: "!" })).toBe("!");
    expect(padTokenFromConfig({ pad_token: { content: "<|endoftext|>" } })).toBe("<|endoftext|>");
    expect(padTokenFromConfig({})).toBeUndefined();
  });
});

describe("BPE merge order on a hand-made vocabulary", () => {
  const base: Record<string, number> = { "<|startoftext|>": 100, "<|endoftext|>": 101, a: 1, b: 2, "c</w>": 3, ab: 4, "bc</w>": 5 };
  it("applies the lowest-ranked merge first", () => {
    const bcFirst = new ClipTokenizer(base, "#version: 0.2\nb c</w>\na b\n");
    expect(bcFirst.encodeRaw("abc")).toEqual([1, 5]);
    const abFirst = new ClipTokenizer(base, "#version: 0.2\na b\nb c</w>\n");
    expect(abFirst.encodeRaw("abc")).toEqual([4, 3]);
  });

  it("maps bytes to CLIP's printable unicode table", () => {
    const table = bytesToUnicode();
    expect(table[33]).toBe("!");
    expect(table[32]).toBe("Ġ");
    expect(new Set(table).size).toBe(256);
  });
});

describe("UnigramTokenizer (T5, SD3's third text encoder)", () => {
  const M = METASPACE;
  // <pad> 0, </s> 1, <unk> 2 as T5's; scores are log probabilities.
  const vocab: [string, number][] = [
    ["<pad>", 0],
    ["</s>", 0],
    ["<unk>", 0],
    [M, -3],
    [`${M}a`, -2],
    [`${M}photo`, -4],
    [`${M}of`, -3],
    [`${M}cat`, -4],
    [`${M}ab`, -10],
    ["bc", -2],
    ["c", -1],
    ["b", -5],
    ["a", -5],
    [`${M}x`, -4],
    ["y", -4],
  ];
  const id = (piece: string) => vocab.findIndex(([p]) => p === piece);
  const t5 = (maxLength = 16) => new UnigramTokenizer(vocab, { unkId: 2, eosId: 1, padId: 0, maxLength });

  it("prefixes every word with ▁ and ends with </s>", () => {
    expect(t5().encode("a photo of a cat")).toEqual([id(`${M}a`), id(`${M}photo`), id(`${M}of`), id(`${M}a`), id(`${M}cat`), 1]);
    expect(t5().encode("  a \n cat ")).toEqual([id(`${M}a`), id(`${M}cat`), 1]);
    expect(t5().encode("")).toEqual([1]);
  });

  it("takes the segmentation of highest total score, not the longest first piece", () => {
    // ▁ab + c scores −11; ▁a + bc scores −4.
    expect(t5().encode("abc")).toEqual([id(`${M}a`), id("bc"), 1]);
  });

  it("reads characters outside the vocabulary as one <unk> per run, and normalises NFKC (full-width letters)", () => {
    expect(t5().encode("x€€y")).toEqual([id(`${M}x`), 2, id("y"), 1]);
    expect(t5().encode("ｃａｔ")).toEqual(t5().encode("cat"));
  });

  it("truncates to keep </s> within maxLength, and pads with <pad>", () => {
    const short = t5(4);
    expect(short.encode("a photo of a cat")).toEqual([id(`${M}a`), id(`${M}photo`), id(`${M}of`), 1]);
    expect(short.padded(short.encode("cat"))).toEqual([id(`${M}cat`), 1, 0, 0]);
  });

  it("reads a tokenizer.json's Unigram model and names what it cannot read", () => {
    const tok = unigramFromJson({ model: { type: "Unigram", unk_id: 2, vocab } }, 8);
    expect(tok.encode("a cat")).toEqual([id(`${M}a`), id(`${M}cat`), 1]);
    expect(() => unigramFromJson({ model: { type: "WordPiece" } }, 8)).toThrow(/model type "WordPiece"; only a Unigram/);
    expect(() => unigramFromJson({ model: { type: "Unigram", vocab: [["a", -1]] } }, 8)).toThrow(/no "<unk>" piece/);
  });
});
