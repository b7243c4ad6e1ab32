/**
 * The services process of bench/tracing.ts: the `hadis` CLI, plus a channel from the bench (Node's
 * IPC) that switches this process's tracing between measured phases. Each switch first flushes
 * what the previous configuration still holds, so a phase does not pay for the one before it.
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { PerformanceObserver } from "node:perf_hooks";
import { configureTelemetry, flushTelemetry, samplerNamed } from "../services/telemetry/tracing.ts";

/** A tracing configuration, as the bench sends it. */
export interface TracingSwitch {
  id: number;
  enabled: boolean;
  spanSink: boolean;
  otlpUrl: string | null;
  sinkTracesPerSecond?: number;
  sampler: string;
  samplerArg?: number;
  /** Record every sampled span and hand it to an exporter that drops it: what recording costs without any export. */
  discard?: boolean;
}

/** A span processor that takes every finished span and does nothing with it. */
const discarding = { onStart: () => undefined, onEnd: () => undefined, forceFlush: async () => undefined, shutdown: async () => undefined };

/** Starts or stops V8's sampling heap profiler (every allocation, collected or not), writing the profile on stop. */
export interface AllocationSampling {
  id: number;
  alloc: "start" | "stop";
  /** Where the stopped profile goes (JSON). */
  file?: string;
}

/** Asks for the main thread's garbage-collection pauses so far (answered as `gcMs`). */
export interface GcQuery {
  id: number;
  gc: true;
}

let gcMs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcMs += entry.duration;
}).observe({ entryTypes: ["gc"] });

let session: Session | null = null;

async function sampleAllocations(m: AllocationSampling): Promise<void> {
  if (m.alloc === "start") {
    session = new Session();
    session.connect();
    await session.post("HeapProfiler.enable");
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 1_024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  } else if (session) {
    const { profile } = await session.post("HeapProfiler.stopSampling");
    writeFileSync(m.file!, JSON.stringify(profile));
    session.disconnect();
    session = null;
  }
}

process.on("message", (m: TracingSwitch | AllocationSampling | GcQuery) => {
  if ("gc" in m) {
    process.send?.({ id: m.id, gcMs });
    return;
  }
  if ("alloc" in m) {
    void sampleAllocations(m).then(() => process.send?.({ id: m.id }));
    return;
  }
  void (async () => {
    await flushTelemetry().catch(() => undefined);
    configureTelemetry({
      enabled: m.enabled,
      spanSink: m.spanSink,
      otlpUrl: m.otlpUrl,
      sampler: samplerNamed(m.sampler, m.samplerArg),
      ...(m.discard ? { processors: [discarding] } : {}),
      ...(m.sinkTracesPerSecond !== undefined ? { sinkTracesPerSecond: m.sinkTracesPerSecond } : {}),
    });
    process.send?.({ id: m.id });
  })();
});
// The channel alone does not keep the process up: SIGTERM stops the services as usual.
process.channel?.unref();

await import("../services/cli/main.ts");
