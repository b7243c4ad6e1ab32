import { describe, expect, it } from "vitest";
import { ProfileGenerationBackend } from "../../../actors/worker/profile-backend.ts";
import { optionsKey, runInOptionGroups } from "../../../actors/worker/option-groups.ts";
import { loadProfiles } from "../../../services/files/profiles.ts";

const profiles = loadProfiles();

/** A backend whose waits are recorded, not slept. */
function backend() {
  const waits: number[] = [];
  const b = new ProfileGenerationBackend({ models: profiles.byName, timeScale: 1, sleep: async (ms) => void waits.push(ms) });
  return { b, waits };
}

const sizeOf = (png: Uint8Array) => [Buffer.from(png).readUInt32BE(16), Buffer.from(png).readUInt32BE(20)];

describe("the profile backend with per-request settings", () => {
  it("waits the profiled latency scaled by asked steps ÷ profiled steps, and says what it applied", async () => {
    const { b, waits } = backend();
    await b.load("sd35-large");
    waits.length = 0;
    const [plain] = await b.generate("sd35-large", [{ prompt: "a", seed: 1 }]);
    const [fewer] = await b.generate("sd35-large", [
      { prompt: "a", seed: 1, options: { steps: 25, guidanceScale: 3, negativePrompt: "fog" } },
    ]);
    // sd3.5-large is profiled at 27 s for 50 steps: 25 steps wait half of it.
    expect(waits).toEqual([27_000, 13_500]);
    expect(plain.applied).toEqual({ steps: 50, width: 16, height: 16, negativePrompt: false, emulated: true });
    expect(fewer.applied).toEqual({ steps: 25, guidanceScale: 3, width: 16, height: 16, negativePrompt: true, emulated: true });
  });

  it("makes the placeholder at the asked size", async () => {
    const { b } = backend();
    await b.load("sd35-medium");
    const [img] = await b.generate("sd35-medium", [{ prompt: "a", seed: 1, options: { width: 1216, height: 832 } }]);
    expect([img.width, img.height]).toEqual([1216, 832]);
    expect(sizeOf(img.image)).toEqual([1216, 832]);
  });

  it("runs a batch of mixed settings as one sub-batch per settings, images in the batch's order", async () => {
    const { b, waits } = backend();
    await b.load("sdxl-lightning");
    waits.length = 0;
    const images = await b.generate("sdxl-lightning", [
      { prompt: "a", seed: 1, options: { steps: 4 } },
      { prompt: "b", seed: 2 },
      { prompt: "c", seed: 3, options: { steps: 4 } },
    ]);
    // Two steps profiled: batch of 2 at 4 steps (900 ms × 2), then 1 at the profiled 2 steps (500 ms).
    expect(waits).toEqual([1_800, 500]);
    expect(images.map((i) => i.applied?.steps)).toEqual([4, 2, 4]);
  });

  it("groups by settings whatever their key order", async () => {
    expect(optionsKey({ steps: 4, width: 8, height: 8 })).toBe(optionsKey({ height: 8, width: 8, steps: 4 }));
    const runs: number[] = [];
    await runInOptionGroups(
      [
        { prompt: "a", seed: 1, options: { steps: 4, guidanceScale: 1 } },
        { prompt: "b", seed: 1, options: { guidanceScale: 1, steps: 4 } },
      ],
      async (_o, part) => {
        runs.push(part.length);
        return part.map(() => ({ image: new Uint8Array(), width: 1, height: 1 }));
      },
    );
    expect(runs).toEqual([2]);
  });
});
