/** The JetStream KV buckets: the plan (rising epochs) and the results of keyed requests. */
import { Kvm, type KV } from "@nats-io/kv";
import { StorageType } from "@nats-io/jetstream";
import type { Subjects } from "../../contracts/subjects.ts";
import type { NatsConnection } from "./connection.ts";

/** The plan's KV bucket. */
export async function openPlanBucket(
  nc: NatsConnection,
  subjects: Subjects,
  replicas = 1,
  storage: "file" | "memory" = "file",
): Promise<KV> {
  const kvm = new Kvm(nc);
  return kvm.create(subjects.names.planBucket, {
    history: 10,
    replicas,
    storage: storage === "memory" ? StorageType.Memory : StorageType.File,
  });
}

/** How long results of keyed requests are kept, ms (the idempotency window). */
export const RESULTS_TTL_MS = 10 * 60_000;

/**
 * Most bytes the results bucket holds (each replica): about 2,700 images of 1.5 MB. Full, it
 * refuses new results (a retry of such a request generates again) rather than fill the disk the
 * work queue and the plan live on. A bucket made before keeps its own limits.
 */
export const RESULTS_MAX_BYTES = 4 * 1024 ** 3;

/** The bucket of results of requests with an idempotency key. */
export async function openResultsBucket(nc: NatsConnection, subjects: Subjects, replicas = 1, maxBytes = RESULTS_MAX_BYTES): Promise<KV> {
  const kvm = new Kvm(nc);
  return kvm.create(subjects.names.resultsBucket, {
    history: 1,
    replicas,
    ttl: RESULTS_TTL_MS,
    storage: StorageType.File,
    max_bytes: maxBytes,
  });
}

/** Calls `onValue` with the current value of `key` and every later one, until `signal` aborts. */
export async function watchKey(kv: KV, key: string, onValue: (data: Uint8Array) => void, signal: AbortSignal): Promise<void> {
  const iter = await kv.watch({ key });
  // Aborted while the watch was being made (its owner closed): no listener would ever stop it.
  if (signal.aborted) {
    iter.stop();
    return;
  }
  signal.addEventListener("abort", () => iter.stop(), { once: true });
  void (async () => {
    for await (const entry of iter) {
      if (entry.operation === "PUT" && entry.value.length > 0) onValue(entry.value);
    }
  })();
}
