/**
 * The services process of bench/tracing.ts: the `hadis` CLI, plus a channel from the bench (Node's
 * IPC) that switches this process's tracing between measured phases. Each switch first flushes
 * what the previous configuration still holds, so a phase does not pay for the one before it.
 */
import { configureTelemetry, flushTelemetry, samplerNamed } from "../services/lib/telemetry.ts";

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

/** An exporter that takes spans and does nothing with them. */
const discarding = { export: (_spans: unknown, done: (r: { code: number }) => void) => done({ code: 0 }), shutdown: async () => undefined };

process.on("message", (m: TracingSwitch) => {
  void (async () => {
    await flushTelemetry().catch(() => undefined);
    configureTelemetry({
      enabled: m.enabled,
      spanSink: m.spanSink,
      otlpUrl: m.otlpUrl,
      sampler: samplerNamed(m.sampler, m.samplerArg),
      ...(m.discard ? { exporters: [discarding] } : {}),
      ...(m.sinkTracesPerSecond !== undefined ? { sinkTracesPerSecond: m.sinkTracesPerSecond } : {}),
    });
    process.send?.({ id: m.id });
  })();
});
// The channel alone does not keep the process up: SIGTERM stops the services as usual.
process.channel?.unref();

await import("../services/cli/main.ts");
