/** What every started service hands back: a name and an ordered, never-rejecting stop. */
export interface RunningService {
  readonly name: string;
  /** Stops intake, finishes in-flight work within the grace period, releases resources. Never rejects. */
  stop(graceMs?: number): Promise<void>;
}

/** Resolves after `ms`, or at once if `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}

/** Waits for `promise` at most `ms`; true if it settled in time. */
export async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const done = promise.then(
    () => true,
    () => true,
  );
  const result = await Promise.race([done, timeout]);
  clearTimeout(timer);
  return result;
}

/**
 * Runs `attempt` (given the ms left) until it resolves, trying again every `everyMs` for up to
 * `waitMs` while it fails with what `transient` says may pass; `first` hears of the first such
 * failure. Any other failure, or the one when the time is up, is thrown.
 */
export async function retryWhile<T>(
  attempt: (leftMs: number) => Promise<T>,
  transient: (err: unknown) => boolean,
  waitMs: number,
  everyMs: number,
  first: (err: unknown) => void = () => {},
): Promise<T> {
  const end = Date.now() + waitMs;
  for (let tries = 0; ; tries++) {
    try {
      return await attempt(Math.max(0, end - Date.now()));
    } catch (err) {
      if (!transient(err) || Date.now() >= end) throw err;
      if (tries === 0) first(err);
      await sleep(Math.min(everyMs, Math.max(0, end - Date.now())));
    }
  }
}
