/** Each feature on hand-written prompts with hand-counted answers (real wink-nlp tagger, small hand-made lexicons). */
import { describe, expect, it } from "vitest";
import { createPromptAnalyzer } from "../../../actors/analyzer/analyzer.ts";
import { countProperRuns, countSpatial, isRare } from "../../../actors/analyzer/features.ts";
import { parseSpatialTerms, type AnalyzerLexicons } from "../../../actors/analyzer/lexicons.ts";
import type { ScoreModel } from "../../../actors/analyzer/score-model.ts";
import type { TaggedPrompt } from "../../../actors/analyzer/tagger.ts";

const lexicons: AnalyzerLexicons = {
  // Rated below 2.5 in Brysbaert et al. (2014): a 1.46, the 1.43, is 1.59, with 2.0, of 1.67, its 1.9, and 1.52.
  abstractWords: new Set(["a", "the", "is", "with", "of", "its", "and", "idea"]),
  commonWords: new Set(
    "a the is with of its and on in to dog dogs cat ball red green grass field sits sitting standing next table s bone man house front woman wearing".split(
      " ",
    ),
  ),
  spatialTerms: parseSpatialTerms("in\non\nto\nwith\nnext to\nin front of\non top of\n"),
};
const model: ScoreModel = {
  means: new Float64Array(8),
  stds: new Float64Array(8).fill(1),
  weights: new Float64Array(8).fill(1),
  intercept: 0,
  source: "test",
};
const analyzer = createPromptAnalyzer(lexicons, model);
const f = (p: string) => analyzer.analyzePrompt(p).features;

describe("promptLength: tokens that are not punctuation", () => {
  it("counts articles and clitics, skips punctuation", () => {
    expect(f("a red ball, on the grass!").promptLength).toBe(6);
    expect(f("a cat laying on the ground next to a person's shoes").promptLength).toBe(12); // 's is a token
  });
});

describe("tokenRarity: words outside the common list", () => {
  it("counts unknown words once per occurrence", () => {
    expect(f("a dog on the aardvark").tokenRarity).toBe(1);
    expect(f("a quokka and a quokka").tokenRarity).toBe(2);
  });
  it("looks clitics up without the apostrophe", () => {
    expect(isRare("'s", new Set(["s"]))).toBe(false);
    expect(f("the dog's bone").tokenRarity).toBe(0);
  });
});

describe("numObjects: nsubj + dobj + pobj", () => {
  it("finds a subject of a finite verb and two prepositional objects", () => {
    expect(f("a red ball sits in the grass on a green field").numObjects).toBe(3);
  });
  it("does not count a bare root noun, counts a direct object", () => {
    expect(f("a woman wearing a vest").numObjects).toBe(1); // vest
    expect(f("a large metal structure").numObjects).toBe(0);
  });
  it("counts pronoun objects and skips conjuncts", () => {
    expect(f("a white plate with a lobster on it").numObjects).toBe(2); // lobster, it
    expect(f("a plate of spaghetti with bacon and basil").numObjects).toBe(2); // spaghetti, bacon
  });
  it("does not count a passive subject", () => {
    expect(f("a half of a grapefruit is shown").numObjects).toBe(1); // grapefruit
  });
});

describe("abstractness: words rated below 2.5", () => {
  it("counts listed words; unknown words are concrete", () => {
    expect(f("a dog with the idea of a zorblax").abstractness).toBe(6); // a, with, the, idea, of, a
  });
});

describe("attributeDensity: adjectives", () => {
  it("counts attributive and predicative adjectives", () => {
    expect(f("a small brown dog on a green field").attributeDensity).toBe(3);
    expect(f("the sail is white").attributeDensity).toBe(1);
  });
  it("does not count 'next' in 'next to' or nouns used as modifiers", () => {
    expect(f("a dog standing next to a table").attributeDensity).toBe(0);
  });
});

describe("spatialRelations: spatial terms as whole words", () => {
  it("counts a multi-word term and its first word", () => {
    expect(f("a man in front of a house").spatialRelations).toBe(2);
    expect(f("a dog standing next to a table").spatialRelations).toBe(2);
  });
  it("matches whole words only", () => {
    expect(countSpatial(["sitting", "into", "tons"], [["in"], ["on"], ["to"]])).toBe(0);
    expect(countSpatial(["on", "on", "top", "of"], [["on"], ["on", "top", "of"]])).toBe(3);
  });
  it("reads 'thru' as 'through', as spaCy's norm does", () => {
    expect(countSpatial(["walking", "thru", "woods"], [["through"]])).toBe(1);
  });
});

describe("actionVerbs: verbs, not auxiliaries", () => {
  it("counts main verbs including participles after their noun", () => {
    expect(f("a dog standing on the grass").actionVerbs).toBe(1);
    expect(f("a monkey is standing on a branch").actionVerbs).toBe(1); // 'is' is an auxiliary
    expect(f("a dog sits and a cat sleeps").actionVerbs).toBe(2);
  });
  it("does not count nouns the tagger reads as verbs", () => {
    expect(f("a knife with a leather handle").actionVerbs).toBe(0);
  });
});

describe("namedEntities: runs of proper nouns", () => {
  it("counts each maximal run once", () => {
    const t: TaggedPrompt = {
      words: ["john", "smith", "in", "paris", "today"],
      pos: ["PROPN", "PROPN", "ADP", "PROPN", "NOUN"],
      isPunct: [false, false, false, false, false],
    };
    expect(countProperRuns(t)).toBe(2);
  });
});

describe("tag corrections (retag)", () => {
  it("keeps a verb with an object, makes a lexicalised -ing word a noun", () => {
    expect(f("a man painting a wall").actionVerbs).toBe(1);
    expect(f("a watercolor painting of a house").actionVerbs).toBe(0);
  });
  it("an attributive participle is both a verb and an attribute (spaCy VERB + amod)", () => {
    const a = f("a stuffed animal in a bucket");
    expect(a.actionVerbs).toBe(1);
    expect(a.attributeDensity).toBe(1);
    expect(a.numObjects).toBe(1); // bucket; 'animal' is the root, not an object of 'stuffed'
  });
  it("'on top' and 'in the wild' head prepositional objects", () => {
    expect(f("a screw with a nut on top").numObjects).toBe(2); // nut, top
    expect(f("a lion in the wild").numObjects).toBe(1); // wild
    expect(f("a lion in the wild").attributeDensity).toBe(1); // still an adjective
  });
});
