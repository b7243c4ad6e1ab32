/**
 * One ONNX worker thread seen from the service: calls its backend's methods by message and
 * waits for the answers. The thread is started on first use (or by `start()`, which reports
 * a backend that cannot load); if it dies, the calls in flight fail with a typed error and the
 * next call starts a new one, `revive` first restoring its state (the models it had loaded).
 * Idle, the thread does not keep the process alive.
 */
import { Worker } from "node:worker_threads";
import { fromWireError, HadisError, type ErrorCode } from "../../../contracts/errors.ts";
import type { ThreadCall, ThreadInit, ThreadReply } from "./thread-protocol.ts";

const HOST = new URL("./thread-host.mjs", import.meta.url);

/** Sends a call to the running thread (for `revive`, which runs before queued calls). */
export type ThreadSend = <T>(op: string, args: unknown[]) => Promise<T>;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** A worker thread running one ONNX backend. */
export class OnnxThread {
  private worker: Worker | null = null;
  private starting: Promise<void> | null = null;
  private readonly pending = new Map<number, Pending>();
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
    this.starting ??= this.spawn().finally(() => (this.starting = null));
    return this.starting;
  }

  /** Calls `op` on the thread's backend. */
  async call<T>(op: string, args: unknown[]): Promise<T> {
    await this.start();
    return this.send<T>(op, args);
  }

  /** Closes the backend in the thread, then ends the thread; calls still in flight fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.starting?.catch(() => undefined);
    const worker = this.worker;
    if (worker) await this.send("close", []).catch(() => undefined);
    this.closed = true;
    this.worker = null;
    await worker?.terminate();
    this.failAll("onnx thread closed");
  }

  private send<T>(op: string, args: unknown[]): Promise<T> {
    const worker = this.worker;
    if (!worker) return Promise.reject(new HadisError(this.failureCode, "onnx thread is not running"));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      if (this.pending.size === 1) worker.ref();
      worker.postMessage({ id, op, args } satisfies ThreadCall);
    });
  }

  private settle(id: number): Pending | undefined {
    const entry = this.pending.get(id);
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
    return entry;
  }

  private failAll(why: string): void {
    const lost = [...this.pending.values()];
    this.pending.clear();
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
      const entry = this.settle(reply.id);
      if (!entry) return;
      if (reply.ok) entry.resolve(reply.value);
      else entry.reject(fromWireError(reply.error));
    });
    // An uncaught error in the thread ends it: 'exit' follows and fails what was in flight.
    worker.on("error", () => undefined);
    worker.once("exit", (code) => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.failAll(`onnx thread exited (code ${code})`);
    });
    worker.unref();
    this.worker = worker;
    if (revived && this.revive) await this.revive((op, args) => this.send(op, args));
  }
}
