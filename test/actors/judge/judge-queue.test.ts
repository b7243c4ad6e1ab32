/** The discriminator's judge queue: batches what waits, drops what is no longer awaited, fails a bad image alone. */
import { describe, expect, it } from "vitest";
import { JudgeQueue } from "../../../actors/judge/judge-queue.ts";
import type { HadisError } from "../../../contracts/errors.ts";
import type { JudgeInput } from "../../../actors/worker/backend.ts";

const image = (prompt: string): JudgeInput => ({ prompt, model: "m", image: new Uint8Array([1]) });
const flush = () => new Promise((r) => setImmediate(r));

/** A judge whose calls wait until released; each score is the prompt's length. */
function gatedJudge(fail?: (prompt: string) => boolean) {
  const calls: string[][] = [];
  const gates: (() => void)[] = [];
  const score = (batch: readonly JudgeInput[]) => {
    calls.push(batch.map((b) => b.prompt));
    return new Promise<number[]>((resolve, reject) => {
      gates.push(() =>
        fail && batch.some((b) => fail(b.prompt)) ? reject(new Error("bad image")) : resolve(batch.map((b) => b.prompt.length)),
      );
    });
  };
  const release = async () => {
    while (gates.length > 0) gates.shift()!();
    await flush();
  };
  return { calls, score, release };
}

describe("JudgeQueue", () => {
  it("runs one call at a time on a one-thread judge, each on up to maxBatch of the oldest waiting images", async () => {
    const judge = gatedJudge();
    const q = new JudgeQueue(judge.score, { concurrency: 1, maxBatch: 3, now: () => 0 });
    const scores = ["a", "bb", "ccc", "dddd", "eeeee"].map((p) => q.submit(image(p)));
    await flush();
    expect(judge.calls).toEqual([["a"]]);
    expect(q.queued).toBe(4);
    await judge.release();
    expect(judge.calls).toEqual([["a"], ["bb", "ccc", "dddd"]]);
    await judge.release();
    await judge.release();
    expect(judge.calls).toEqual([["a"], ["bb", "ccc", "dddd"], ["eeeee"]]);
    expect(await Promise.all(scores)).toEqual([1, 2, 3, 4, 5]);
  });

  it("drops unscored, as deadline_exceeded, an image whose answer-by time has passed when its turn comes", async () => {
    const judge = gatedJudge();
    let now = 0;
    let expired = 0;
    const q = new JudgeQueue(judge.score, { concurrency: 1, maxBatch: 8, now: () => now, onExpired: (n) => (expired += n) });
    const first = q.submit(image("first"), 100);
    const late = q.submit(image("late"), 50).then(
      () => null,
      (e: unknown) => e as HadisError,
    );
    const live = q.submit(image("live"), 1_000);
    await flush();
    now = 60; // the first call took past the second image's answer-by time
    await judge.release();
    expect(judge.calls).toEqual([["first"], ["live"]]);
    expect((await late)?.code).toBe("deadline_exceeded");
    expect(expired).toBe(1);
    await judge.release();
    expect([await first, await live]).toEqual([5, 4]);
  });

  it("fails a bad image alone: a failed batch runs again in halves, and skips what expired meanwhile", async () => {
    const judge = gatedJudge((p) => p === "bad");
    let now = 0;
    const q = new JudgeQueue(judge.score, { concurrency: 1, maxBatch: 4, now: () => now });
    const blocker = q.submit(image("x"));
    const results = [q.submit(image("ok1")), q.submit(image("bad")), q.submit(image("ok2"), 10), q.submit(image("ok3"))].map((p) =>
      p.catch((e: unknown) => e as Error),
    );
    await flush();
    await judge.release(); // x
    expect(judge.calls.at(-1)).toEqual(["ok1", "bad", "ok2", "ok3"]);
    now = 20; // the whole batch's failed run took past ok2's answer-by time
    for (let i = 0; i < 6; i++) await judge.release();
    expect(judge.calls.slice(2)).toEqual([["ok1", "bad"], ["ok1"], ["bad"], ["ok3"]]);
    const [ok1, bad, ok2, ok3] = await Promise.all(results);
    expect(ok1).toBe(3);
    expect((bad as Error).message).toBe("bad image");
    expect((ok2 as HadisError).code).toBe("deadline_exceeded");
    expect(ok3).toBe(3);
    expect(await blocker).toBe(1);
  });

  it("with no concurrency limit and batches of one, gives every image its own call at once (the profile judge)", async () => {
    const judge = gatedJudge();
    const q = new JudgeQueue(judge.score, { concurrency: Infinity, maxBatch: 1, now: () => 0 });
    const scores = ["a", "bb", "ccc"].map((p) => q.submit(image(p)));
    await flush();
    expect(judge.calls).toEqual([["a"], ["bb"], ["ccc"]]);
    expect(q.queued).toBe(0);
    await judge.release();
    expect(await Promise.all(scores)).toEqual([1, 2, 3]);
  });
  it("fills a batch with images still awaited, past the expired ones ahead of them", async () => {
    const judge = gatedJudge();
    let now = 0;
    const q = new JudgeQueue(judge.score, { concurrency: 1, maxBatch: 3, now: () => now });
    const first = q.submit(image("x"));
    const late = [1, 2].map((i) =>
      q.submit(image(`late${i}`), 10).then(
        () => null,
        (e: unknown) => (e as HadisError).code,
      ),
    );
    const live = ["a", "bb", "ccc", "dddd"].map((p) => q.submit(image(p), 1_000));
    await flush();
    now = 20;
    await judge.release();
    expect(judge.calls).toEqual([["x"], ["a", "bb", "ccc"]]);
    expect(await Promise.all(late)).toEqual(["deadline_exceeded", "deadline_exceeded"]);
    await judge.release();
    await judge.release();
    expect(await Promise.all([first, ...live])).toEqual([1, 1, 2, 3, 4]);
  });

  it("fails the images of a judge call that gives the wrong number of scores (no unscored verdict), and goes on", async () => {
    let calls = 0;
    const q = new JudgeQueue(async (batch) => (++calls === 1 ? [] : batch.map(() => 0.5)), { concurrency: 1, maxBatch: 1, now: () => 0 });
    await expect(q.submit(image("a"))).rejects.toThrow(/gave 0 scores for 1 images/);
    expect(await q.submit(image("b"))).toBe(0.5);
  });

  it("closed, refuses what waits and what comes; the call running finishes", async () => {
    const judge = gatedJudge();
    const q = new JudgeQueue(judge.score, { concurrency: 1, maxBatch: 4, now: () => 0 });
    const running = q.submit(image("run"));
    const waiting = q.submit(image("wait"));
    await flush();
    q.close(new Error("stopping"));
    await expect(waiting).rejects.toThrow("stopping");
    await expect(q.submit(image("new"))).rejects.toThrow("stopping");
    await judge.release();
    expect(await running).toBe(3);
    expect(judge.calls).toEqual([["run"]]);
  });
});
