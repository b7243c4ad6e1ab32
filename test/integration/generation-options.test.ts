import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { HadisError } from "../../contracts/errors.ts";
import type { GenerateRequest } from "../../contracts/messages.ts";

let t: TestSystem;
beforeAll(async () => {
  t = await startTestSystem();
});
afterAll(async () => {
  await t?.stop();
});

async function refusal(request: GenerateRequest): Promise<HadisError> {
  try {
    await t.client.generate(request);
  } catch (err) {
    return err as HadisError;
  }
  throw new Error("not refused");
}

describe("per-request generation settings over real NATS", () => {
  const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);

  it("carries settings to the worker, which makes the asked size and says what it applied", async () => {
    // Pinned to the heavy model (sd3.5-medium here): 20 steps at guidance 5 are in its range.
    const reply = await t.client.generate({
      prompt: routes.light,
      deadlineMs: 20_000,
      quality: "best",
      steps: 20,
      guidanceScale: 5,
      width: 768,
      height: 768,
      negativePrompt: "blurry",
    });
    expect(reply.route).toBe("heavy");
    expect(reply.servedBy).toBe(DEFAULT_STATIC.heavy);
    expect([reply.width, reply.height]).toEqual([768, 768]);
    expect(reply.applied).toEqual({ steps: 20, guidanceScale: 5, width: 768, height: 768, negativePrompt: true, emulated: true });
  });

  it("quality fast serves the light model's image unjudged, even for a prompt the router finds hard", async () => {
    const reply = await t.client.generate({ prompt: routes.heavy, deadlineMs: 20_000, quality: "fast", steps: 4 });
    expect(reply.route).toBe("light");
    expect(reply.servedBy).toBe(DEFAULT_STATIC.light);
    expect(reply.score).toBeUndefined();
    expect(reply.applied?.steps).toBe(4);
  });

  it("refuses, before anything is queued, settings a model that may serve the request does not support", async () => {
    const auto = await refusal({ prompt: routes.light, deadlineMs: 20_000, steps: 30 });
    expect(auto.code).toBe("invalid_request");
    expect(auto.details.field).toBe("steps");
    expect(auto.message).toContain(`outside ${DEFAULT_STATIC.light}'s range 1 to 8`);
    expect(auto.message).toContain('ask for quality "best"');
    const size = await refusal({ prompt: routes.light, deadlineMs: 20_000, width: 100, height: 100 });
    expect(size.details.field).toBe("width");
    const half = await refusal({ prompt: routes.light, deadlineMs: 20_000, width: 1024 } as GenerateRequest);
    expect([half.code, half.details.field]).toEqual(["invalid_request", "height"]);
    const quality = await refusal({ prompt: routes.light, quality: "ultra" } as unknown as GenerateRequest);
    expect([quality.code, quality.details.field]).toEqual(["invalid_request", "quality"]);
    const negative = await refusal({ prompt: routes.light, negativePrompt: "x".repeat(2_001) });
    expect([negative.code, negative.details.field]).toEqual(["prompt_too_long", "negativePrompt"]);
    // Nothing reached a worker: every served count is what it was.
    const served = t.system.workers!.agents.reduce((n, a) => n + a.status("x").servedTotal, 0);
    await refusal({ prompt: routes.light, deadlineMs: 20_000, steps: 30 });
    expect(t.system.workers!.agents.reduce((n, a) => n + a.status("x").servedTotal, 0)).toBe(served);
  });

  it("a keyed retry with other settings is another request, refused as a reused key", async () => {
    const key = `opts-${Date.now()}`;
    await t.client.generate({ prompt: routes.light, deadlineMs: 20_000, idempotencyKey: key, quality: "fast" });
    const again = await t.client.generate({ prompt: routes.light, deadlineMs: 20_000, idempotencyKey: key, quality: "fast" });
    expect(again.deduplicated).toBe(true);
    const other = await refusal({ prompt: routes.light, deadlineMs: 20_000, idempotencyKey: key, quality: "fast", steps: 2 });
    expect([other.code, other.details.field]).toEqual(["invalid_request", "idempotencyKey"]);
  });
});
