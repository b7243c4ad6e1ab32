import { describe, expect, it } from "vitest";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SCHEMAS_DIR, schemaFiles } from "../../tools/make-schemas.ts";
import { jsonSchemaValidator } from "../helpers/http.ts";
import { encodeJson } from "../../contracts/envelope.ts";
import { toWireError, HadisError } from "../../contracts/errors.ts";
import { GenerateReplySchema } from "../../contracts/messages.ts";

const committed = (file: string) => readFileSync(join(SCHEMAS_DIR, file), "utf8");

describe("the committed JSON Schemas of the public messages", () => {
  it("match what the zod schemas generate (run `node --import tsx tools/make-schemas.ts` after changing one)", () => {
    const files = schemaFiles();
    expect(readdirSync(SCHEMAS_DIR).sort()).toEqual(files.map((f) => f.file).sort());
    for (const { file, text } of files) expect(committed(file), file).toBe(text);
  });

  it("check what the services send and refuse what they refuse", () => {
    const ajv = jsonSchemaValidator();
    for (const { file } of schemaFiles()) ajv.addSchema(JSON.parse(committed(file)), file);
    const request = ajv.getSchema("GenerateRequest.json")!;
    expect(
      request({
        prompt: "a red bicycle",
        seed: 1,
        deadlineMs: 5_000,
        idempotencyKey: "k",
        negativePrompt: "fog",
        width: 768,
        height: 768,
        steps: 20,
        guidanceScale: 4.5,
        quality: "fast",
        v: 1,
      }),
    ).toBe(true);
    for (const bad of [
      { prompt: "x", extra: 1 },
      { prompt: "x", height: 8 },
      { prompt: "x", deadlineMs: 0 },
      { prompt: "x", v: 2 },
      { prompt: "x", guidanceScale: -1 },
    ])
      expect(request(bad), JSON.stringify(bad)).toBe(false);
    // A reply as JSON callers read it (image base64), built as the router builds one and checked by the zod schema too.
    const reply = GenerateReplySchema.parse({
      v: 1,
      requestId: "r",
      image: new Uint8Array([137, 80, 78, 71]),
      imageFormat: "png",
      width: 16,
      height: 16,
      seed: 1,
      route: "light->heavy",
      models: { light: "a", heavy: "b" },
      servedBy: "b",
      difficulty: 0.1,
      routerThreshold: 0.2,
      score: 0.01,
      threshold: 0.1,
      planEpoch: 3,
      timings: { routeMs: 1, queueWaitMs: 2, lightMs: 3, judgeMs: 4, heavyMs: 5, totalMs: 15 },
      applied: { steps: 4, width: 16, height: 16, negativePrompt: false, emulated: true },
    });
    const json = JSON.parse(new TextDecoder().decode(encodeJson(reply)));
    expect(ajv.getSchema("GenerateReply.json")!(json), JSON.stringify(ajv.errors)).toBe(true);
    expect(ajv.getSchema("GenerateReply.json")!({ ...json, route: "sideways" })).toBe(false);
    expect(ajv.getSchema("ErrorReply.json")!(toWireError(new HadisError("overloaded", "full", { retryAfterMs: 100 }), 1))).toBe(true);
    expect(
      ajv.getSchema("JobEvent.json")!({ v: 1, jobId: "j1", seq: 2, atMs: 1, kind: "judged", score: 0.1, threshold: 0.2, accept: false }),
    ).toBe(true);
    expect(ajv.getSchema("JobEvent.json")!({ v: 1, jobId: "j1", seq: 2, atMs: 1, kind: "judged" })).toBe(false);
  });
});
