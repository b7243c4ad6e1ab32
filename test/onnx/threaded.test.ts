/** The ONNX backends the services run, each in a worker thread: same results, a free event loop. */
import { cpSync, renameSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { waitFor } from "../helpers/processes.ts";
import { OnnxGenerationBackend } from "../../services/onnx/generation-backend.ts";
import { OnnxClipJudge } from "../../services/onnx/clip-judge.ts";
import { ThreadedClipJudge, ThreadedGenerationBackend } from "../../services/onnx/threaded.ts";
import { HadisError } from "../../contracts/errors.ts";
import { useTinyModels } from "../helpers/tiny-models.ts";

const tiny = useTinyModels("threaded");

const options = () => ({
  models: {
    turbo: { dir: tiny.dirs.turbo, steps: 1, guidanceScale: 0 },
    // A 768×768 image: its VAE decode is one session run of hundreds of milliseconds.
    large: { dir: tiny.dirs.turbo, steps: 1, guidanceScale: 0, height: 768, width: 768 },
    sd15: { dir: tiny.dirs.sd15, steps: 2 },
  },
  intraOpNumThreads: 1,
});

/** Runs `work`, counting the ticks of a 5 ms timer meanwhile. */
async function ticksDuring<T>(work: () => Promise<T>): Promise<{ value: T; ms: number; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  const start = performance.now();
  try {
    const value = await work();
    return { value, ms: performance.now() - start, ticks };
  } finally {
    clearInterval(timer);
  }
}

describe("ThreadedGenerationBackend", () => {
  it("makes the images the in-process backend makes, and keeps the event loop free while it does", async () => {
    const threaded = new ThreadedGenerationBackend(options());
    const local = new OnnxGenerationBackend(options());
    try {
      await Promise.all([threaded.load("large"), local.load("large")]);
      const batch = [{ prompt: "a red bicycle", seed: 3 }];
      const run = await ticksDuring(() => threaded.generate("large", batch));
      const [expected] = await local.generate("large", batch);
      expect(Buffer.from(run.value[0].image).equals(Buffer.from(expected.image))).toBe(true);
      expect([run.value[0].width, run.value[0].height]).toEqual([768, 768]);
      // In process the timer fires once in the whole run (the session blocks the loop); here it keeps ticking.
      expect(run.ticks, `${run.ticks} ticks in ${run.ms.toFixed(0)} ms`).toBeGreaterThanOrEqual(Math.floor(run.ms / 50));
    } finally {
      await Promise.all([threaded.close(), local.close()]);
    }
  });

  it("passes on typed errors, and a thread that dies fails its calls and comes back with its models", async () => {
    const b = new ThreadedGenerationBackend(options());
    try {
      const unknown = await b.load("nope").catch((err: unknown) => err);
      expect(unknown).toBeInstanceOf(HadisError);
      expect((unknown as HadisError).code).toBe("unknown_model");
      await expect(b.generate("turbo", [{ prompt: "a cat", seed: 1 }])).rejects.toThrow(/not loaded/);
      await b.load("turbo");
      const [first] = await b.generate("turbo", [{ prompt: "a cat", seed: 1 }]);
      // The thread dies under a batch: the batch fails with a generation error, nothing hangs.
      const worker = (b as unknown as { thread: { worker: { terminate(): Promise<number> } } }).thread.worker;
      const lost = b.generate("turbo", [{ prompt: "a cat", seed: 1 }]).catch((err: unknown) => err);
      await worker.terminate();
      expect(((await lost) as HadisError).code).toBe("generation_failed");
      // The next call starts a new thread that loads the model again: same image as before.
      const [again] = await b.generate("turbo", [{ prompt: "a cat", seed: 1 }]);
      expect(Buffer.from(again.image).equals(Buffer.from(first.image))).toBe(true);
    } finally {
      await b.close();
    }
    await expect(b.generate("turbo", [{ prompt: "a cat", seed: 1 }])).rejects.toThrow(/closed/);
  });
  it("a batch the thread does not answer in time fails as a generation failure; calls fail at once until the old thread has finished and is ended, then a new one starts", async () => {
    // The 768×768 image takes hundreds of milliseconds: longer than this limit, as a hung session would.
    const b = new ThreadedGenerationBackend(options(), { generateMs: 20 });
    try {
      await b.load("large");
      const thread = (b as unknown as { thread: { running: boolean; leftBehind: number } }).thread;
      const err = (await b.generate("large", [{ prompt: "a red bicycle", seed: 3 }]).catch((e: unknown) => e)) as HadisError;
      expect(err).toBeInstanceOf(HadisError);
      expect(err.code).toBe("generation_failed");
      expect(err.message).toBe("onnx thread did not answer generate within 20 ms; left behind, a new one takes the next call");
      expect(thread.running).toBe(false);
      expect(thread.leftBehind).toBe(1); // still decoding: ending it inside the session run could take the process down
      // Until it has finished, calls fail at once: no thread after thread, each holding its models.
      const meanwhile = (await b.load("turbo").catch((e: unknown) => e)) as HadisError;
      expect(meanwhile.message).toMatch(/left behind past its time limit is still running/);
      await waitFor(() => thread.leftBehind === 0, 10_000, "the thread left behind to finish");
      // The worker swaps away (nothing to unload in a thread that is gone) and loads again: a new thread.
      await b.unload("large");
      await b.load("turbo");
      expect(thread.running).toBe(true);
    } finally {
      await b.close();
    }
  });

  it("time a call spends waiting behind others in the thread does not count against its limit", async () => {
    const probe = new ThreadedGenerationBackend(options());
    let singleMs: number;
    try {
      await probe.load("large");
      await probe.generate("large", [{ prompt: "warm", seed: 1 }]);
      // The slowest of three runs: one run's time on a busy machine is no measure of the next.
      singleMs = 0;
      for (const seed of [1, 2, 3]) {
        const t0 = performance.now();
        await probe.generate("large", [{ prompt: "a red bicycle", seed }]);
        singleMs = Math.max(singleMs, performance.now() - t0);
      }
    } finally {
      await probe.close();
    }
    // A limit well above one batch, below the six the last call takes in all (five waited for, its
    // own): 3 batches' time was once too little for one batch while other test files ran (713 ms).
    const b = new ThreadedGenerationBackend(options(), { generateMs: Math.ceil(singleMs * 4.5) });
    try {
      await b.load("large");
      const seeds = [1, 2, 3, 4, 5, 6];
      const all = await Promise.all(seeds.map((seed) => b.generate("large", [{ prompt: "a red bicycle", seed }])));
      expect(all.map((images) => images.length)).toEqual(seeds.map(() => 1));
    } finally {
      await b.close();
    }
  });

  it("a restarted thread that cannot load its model again is not kept: the next batch tries again", async () => {
    const dir = join(tiny.root, "turbo-copy");
    cpSync(tiny.dirs.turbo, dir, { recursive: true });
    const b = new ThreadedGenerationBackend({ models: { turbo: { dir, steps: 1, guidanceScale: 0 } }, intraOpNumThreads: 1 });
    try {
      await b.load("turbo");
      await (b as unknown as { thread: { worker: { terminate(): Promise<number> } } }).thread.worker.terminate();
      // The model's files vanish while the thread is down: the restart cannot load it.
      renameSync(join(dir, "unet"), join(dir, "unet-away"));
      await expect(b.generate("turbo", [{ prompt: "a cat", seed: 1 }])).rejects.toThrow(/unet/);
      // Back again: the next batch starts a thread that loads it (not one left without it).
      renameSync(join(dir, "unet-away"), join(dir, "unet"));
      expect(await b.generate("turbo", [{ prompt: "a cat", seed: 1 }])).toHaveLength(1);
      // Down again, and the model gone for good: the worker's swap away from it (an unload)
      // succeeds, rather than failing on every try to reload what it unloads.
      await (b as unknown as { thread: { worker: { terminate(): Promise<number> } } }).thread.worker.terminate();
      renameSync(join(dir, "unet"), join(dir, "unet-away"));
      await b.unload("turbo");
      await expect(b.generate("turbo", [{ prompt: "a cat", seed: 1 }])).rejects.toThrow(/not loaded/);
    } finally {
      await b.close();
    }
  });
});

describe("ThreadedClipJudge", () => {
  it("scores as the in-process judge does and keeps thresholds from those scores", async () => {
    const threaded = await ThreadedClipJudge.load({ dir: tiny.dirs.clip, intraOpNumThreads: 1 });
    const local = await OnnxClipJudge.load({ dir: tiny.dirs.clip, intraOpNumThreads: 1 });
    const gen = new OnnxGenerationBackend(options());
    try {
      await gen.load("turbo");
      const images = await gen.generate(
        "turbo",
        [1, 2, 3, 4].map((seed) => ({ prompt: `a cat ${seed}`, seed })),
      );
      const batch = images.map((img, i) => ({ prompt: `a cat ${i}`, model: "turbo", image: img.image }));
      const scores = await threaded.score(batch);
      expect(scores).toEqual(await local.score(batch));
      expect(threaded.thresholdFor("turbo", 0.5)).toBe(local.thresholdFor("turbo", 0.5));
      expect(threaded.thresholdFor("other", 0.5)).toBe(0);
    } finally {
      await Promise.all([threaded.close(), local.close(), gen.close()]);
    }
  });

  it("refuses to start on a folder that is not a judge, naming the file", async () => {
    await expect(ThreadedClipJudge.load({ dir: join(tiny.root, "nothing-here") })).rejects.toThrow(/image_encoder/);
  });
});
