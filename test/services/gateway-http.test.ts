import { describe, expect, it } from "vitest";
import { acceptQuality, headerNameOf, headerValueOf, replyHeaders, wantsPng } from "../../services/gateway/http.ts";
import { checkGatewayRequest } from "../../services/gateway/intake.ts";
import { HadisError } from "../../contracts/errors.ts";

describe("the gateway's HTTP helpers", () => {
  it("answers the PNG only when Accept prefers it to JSON", () => {
    expect(wantsPng(undefined)).toBe(false);
    expect(wantsPng("*/*")).toBe(false);
    expect(wantsPng("image/png")).toBe(true);
    expect(wantsPng("image/*")).toBe(true);
    expect(wantsPng("application/json, image/png")).toBe(false); // a tie: JSON
    expect(wantsPng("application/json;q=0.5, image/png")).toBe(true);
    expect(wantsPng("image/png;q=0.2, */*;q=0.9")).toBe(false); // the specific range's quality counts, not the wildcard's
    expect(acceptQuality("text/html, image/*;q=0.3", "image/png")).toBe(0.3);
    expect(acceptQuality("text/html", "image/png")).toBe(0);
  });

  it("names each reply field's header and keeps header values printable ASCII", () => {
    expect(headerNameOf("requestId")).toBe("X-Hadis-Request-Id");
    expect(headerNameOf("planEpoch")).toBe("X-Hadis-Plan-Epoch");
    expect(headerNameOf("route")).toBe("X-Hadis-Route");
    expect(headerValueOf("light→heavy")).toBe("light%E2%86%92heavy");
    expect(decodeURIComponent(headerValueOf("50% off"))).toBe("50% off");
    expect(headerValueOf({ light: "a" })).toBe('{"light":"a"}');
    const headers = replyHeaders({ v: 1, requestId: "r", image: new Uint8Array([1]), route: "light", timings: { totalMs: 3 } } as never);
    expect(headers).toEqual({ "X-Hadis-Request-Id": "r", "X-Hadis-Route": "light", "X-Hadis-Timings": '{"totalMs":3}' });
  });

  it("refuses what the router would refuse without a plan, naming the field", () => {
    const refusal = (body: unknown) => {
      try {
        checkGatewayRequest(body);
      } catch (err) {
        return [(err as HadisError).code, (err as HadisError).details.field];
      }
      return null;
    };
    expect(refusal({ prompt: "a cat", steps: 4, quality: "fast" })).toBeNull();
    expect(refusal({ prompt: "  " })).toEqual(["invalid_request", "prompt"]);
    expect(refusal({ prompt: "🐱".repeat(2_000) })).toBeNull(); // characters, not UTF-16 units
    expect(refusal({ prompt: "a".repeat(2_001) })).toEqual(["prompt_too_long", "prompt"]);
    expect(refusal({ prompt: "a", negativePrompt: "n".repeat(2_001) })).toEqual(["prompt_too_long", "negativePrompt"]);
    expect(refusal({ prompt: "a", height: 512 })).toEqual(["invalid_request", "width"]);
    expect(refusal([1])).toEqual(["invalid_request", undefined]);
    expect(refusal({ prompt: "a", v: 3 })).toEqual(["unsupported_version", "v"]);
  });
});
