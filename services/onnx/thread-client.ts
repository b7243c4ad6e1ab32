/**
 * One ONNX worker thread seen from the service: calls its backend's methods by message and
 * waits for the answers. The thread is started on first use (or by `start()`, which reports
 * a backend that cannot load); if it dies, the calls in flight fail with a typed error and the
 * next call starts a new one, `revive` first restoring its state (the models it had loaded).
 * A thread that makes no progress for the time limit of the call it runs (the oldest it has not
 * answered: calls run one after another, so time spent waiting behind others does not count)
 * fails what it was sent the same way. It is left to finish, and ended once it has (a thread
 * ended inside a native session run can take the process down with it); until then calls fail at
 * once, rather than start thread after thread. Idle, a thread does not keep the process alive.
 */
import { Worker } from "node:worker_threads";
import { fromWireError, HadisError, type ErrorCode } from "../../contracts/errors.ts";
import type { ThreadCall, ThreadInit, ThreadReply } from "./thread-protocol.ts";

/**
 * The thread's entry: the compiled thread module itself, or, run from source, a plain JavaScript
 * host that registers the TypeScript loader first (a worker may not inherit the parent's).
 */
const HOST = import.meta.url.endsWith(".ts") ? new URL("./thread-host.mjs", import.meta.url) : new URL("./onnx-thread.js", import.meta.url);
/** How long `close()` lets the thread finish what it runs before ending it. */
const CLOSE_WAIT_MS = 30_000;

/** Sends a call to the running thread (for `revive`, which runs before queued calls). */
export type ThreadSend = <T>(op: string, args: unknown[], timeoutMs?: number) => Promise<T>;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  op: string;
  timeoutMs?: number;
}

/** A worker thread running one ONNX backend. */
export class OnnxThread {
  private worker: Worker | null = null;
  private starting: Promise<void> | null = null;
  private readonly pending = new Map<number, Pending>();
  /**
   * Threads left behind by a call that timed out, still running what they were sent, with how
   * many of those calls they have yet to answer (each is ended once it has answered them all).
   * The running thread's are the pending calls: every pending call is the running thread's.
   */
  private readonly abandoned = new Map<Worker, number>();
  /** Fires when the running thread has made no progress for its oldest call's time limit. */
  private progress: NodeJS.Timeout | null = null;
  private nextId = 1;
  private spawns = 0;
  private closed = false;

  constructor(
    private readonly init: ThreadInit,
    /** Error code of calls lost to a dying thread. */
    private readonly failureCode: ErrorCode,
    private readonly revive?: (send: ThreadSend) => Promise<void>,
  ) {}

  /** Starts the thread and waits until its backend has loaded; rejects with why it could not. */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(new HadisError(this.failureCode, "onnx thread is closed"));
    if (this.worker) return Promise.resolve();
    if (this.abandoned.size > 0) {
      return Promise.reject(
        new HadisError(this.failureCode, "onnx thread left behind past its time limit is still running: no new thread until it finishes"),
      );
    }
    this.starting ??= this.spawn().finally(() => (this.starting = null));
    return this.starting;
  }

  /** Whether the thread runs now (a call to a thread that is not running starts it first). */
  get running(): boolean {
    return this.worker !== null;
  }

  /** Calls `op` on the thread's backend; with `timeoutMs`, it fails if the thread runs it that long without answering (see above). */
  async call<T>(op: string, args: unknown[], timeoutMs?: number): Promise<T> {
    await this.start();
    return this.send<T>(op, args, timeoutMs);
  }

  /**
   * Refuses new calls, closes the backend in the thread (after the calls it is running, for at
   * most `CLOSE_WAIT_MS`), then ends the thread; whatever is still in flight fails.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.starting?.catch(() => undefined);
    const worker = this.worker;
    if (worker) {
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)));
      await Promise.race([this.send("close", []).catch(() => undefined), waited]);
      clearTimeout(timer);
    }
    this.worker = null;
    await worker?.terminate();
    this.failAll("onnx thread closed");
  }

  private send<T>(op: string, args: unknown[], timeoutMs?: number): Promise<T> {
    const worker = this.worker;
    if (!worker) return Promise.reject(new HadisError(this.failureCode, "onnx thread is not running"));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, op, ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
      if (this.pending.size === 1) worker.ref();
      if (!this.progress) this.armProgress();
      worker.postMessage({ id, op, args } satisfies ThreadCall);
    });
  }

  /** (Re)starts the progress timer for the oldest call not answered yet, when it has a limit. */
  private armProgress(): void {
    if (this.progress) clearTimeout(this.progress);
    this.progress = null;
    const worker = this.worker;
    const oldest = this.pending.values().next().value;
    if (!worker || oldest?.timeoutMs === undefined) return;
    const { op, timeoutMs } = oldest;
    this.progress = setTimeout(() => this.hung(worker, op, timeoutMs), timeoutMs);
    this.progress.unref();
  }

  /**
   * A call the thread did not answer in time: what it was sent fails now, and the next call
   * starts a new thread. The old one is left to finish (it may only be slow), unreferenced, and
   * ended once it has answered everything it was sent; one truly hung stays, holding its memory.
   */
  private hung(worker: Worker, op: string, timeoutMs: number): void {
    if (this.worker !== worker) return;
    this.worker = null;
    this.abandoned.set(worker, this.pending.size);
    worker.unref();
    this.failAll(`onnx thread did not answer ${op} within ${timeoutMs} ms; left behind, a new one takes the next call`);
    if (this.abandoned.get(worker) === 0) this.retire(worker);
  }

  /** Ends a thread left behind, now idle. */
  private retire(worker: Worker): void {
    this.abandoned.delete(worker);
    void worker.terminate();
  }

  /** Threads left behind by timed-out calls that are still running. */
  get leftBehind(): number {
    return this.abandoned.size;
  }

  private settle(id: number): Pending | undefined {
    const entry = this.pending.get(id);
    this.pending.delete(id);
    this.armProgress(); // an answer is progress: the next call gets its whole limit
    if (this.pending.size === 0) this.worker?.unref();
    return entry;
  }

  private failAll(why: string): void {
    const lost = [...this.pending.values()];
    this.pending.clear();
    if (this.progress) clearTimeout(this.progress);
    this.progress = null;
    for (const p of lost) p.reject(new HadisError(this.failureCode, why));
  }

  private async spawn(): Promise<void> {
    const revived = this.spawns++ > 0;
    const worker = new Worker(HOST, { workerData: this.init });
    await new Promise<void>((resolve, reject) => {
      const onExit = (code: number) => reject(new HadisError(this.failureCode, `onnx thread exited (code ${code}) while starting`));
      worker.once("error", reject);
      worker.once("exit", onExit);
      worker.once("message", (reply: ThreadReply) => {
        worker.off("error", reject);
        worker.off("exit", onExit);
        if (reply.ok) resolve();
        else reject(fromWireError(reply.error));
      });
    }).catch(async (err) => {
      await worker.terminate();
      throw err;
    });
    worker.on("message", (reply: ThreadReply) => {
      const unanswered = this.abandoned.get(worker);
      if (unanswered !== undefined) {
        if (unanswered <= 1)
          this.retire(worker); // idle now: safe to end
        else this.abandoned.set(worker, unanswered - 1);
        return;
      }
      const entry = this.settle(reply.id);
      if (!entry) return;
      if (reply.ok) entry.resolve(reply.value);
      else entry.reject(fromWireError(reply.error));
    });
    // An uncaught error in the thread ends it: 'exit' follows and fails what was in flight, saying why.
    let crash = "";
    worker.on("error", (err) => (crash = `: ${err.message}`));
    worker.once("exit", (code) => {
      this.abandoned.delete(worker);
      if (this.worker !== worker) return;
      this.worker = null;
      this.failAll(`onnx thread exited (code ${code})${crash}`);
    });
    worker.unref();
    this.worker = worker;
    if (this.closed) {
      // closed while it started: nobody will end it but us.
      this.worker = null;
      await worker.terminate();
      throw new HadisError(this.failureCode, "onnx thread is closed");
    }
    if (!revived || !this.revive) return;
    try {
      await this.revive((op, args, timeoutMs) => this.send(op, args, timeoutMs));
    } catch (err) {
      // A thread without its models would fail every batch: end it, and the next call tries again;
      // unless its reload timed out: then it is left behind, to be ended once it has finished.
      if (this.abandoned.has(worker)) throw err;
      this.worker = null;
      await worker.terminate();
      throw err;
    }
  }
}
