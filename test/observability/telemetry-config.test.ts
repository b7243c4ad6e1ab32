/**
 * Telemetry configuration is checked before anything starts, and a fault of telemetry at run time
 * never costs a reply. With `OTEL_EXPORTER_OTLP_ENDPOINT=127.0.0.1:4599` (no scheme) `hadis start`
 * used to exit 2 blaming the dashboard's port, and with `--no-dashboard` (or `hadis serve`) it said
 * "serving" while no request was ever answered: building the exporter threw on every request.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { telemetryEnvProblems } from "../../services/telemetry/config.ts";
import { startNatsServer, freePort, type LocalServer } from "../../services/nats/server.ts";
import { metricsText } from "../../services/telemetry/metrics.ts";
import { shutdownTelemetry, tracingEnabled } from "../../services/telemetry/tracing.ts";
import { spawnHadis, stopSpawned } from "../helpers/processes.ts";
import { startTestSystem, type TestSystem } from "../helpers/system.ts";

describe("telemetryEnvProblems", () => {
  const named = (env: Record<string, string>) => telemetryEnvProblems(env).map((p) => `${p.variable}: ${p.problem}`);

  it("accepts an empty environment and the values the specification allows", () => {
    expect(telemetryEnvProblems({})).toEqual([]);
    expect(
      telemetryEnvProblems({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://collector.example:4318/v1/traces",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.1",
        OTEL_BSP_SCHEDULE_DELAY: "0",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,k8s.pod.name=pod%201",
        OTEL_EXPORTER_OTLP_HEADERS: "api-key=secret",
        OTEL_SDK_DISABLED: "false",
        HADIS_SPAN_SINK_RATE: "all",
        HADIS_TRACING: "ON",
        OTEL_EXPORTER_OTLP_COMPRESSION: "", // blank is unset
      }),
    ).toEqual([]);
  });

  it("names each variable it cannot use and says what to write", () => {
    const problems = telemetryEnvProblems({ OTEL_EXPORTER_OTLP_ENDPOINT: "127.0.0.1:4599" });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ variable: "OTEL_EXPORTER_OTLP_ENDPOINT", value: "127.0.0.1:4599" });
    expect(problems[0].problem).toMatch(/http:\/\/127\.0\.0\.1:4599/);
    expect(named({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })[0]).toMatch(
      /OTEL_EXPORTER_OTLP_PROTOCOL: OTLP over gRPC is not supported here.*http\/protobuf/,
    );
    expect(named({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://h/v1/traces" })[0]).toMatch(/scheme ftp/);
    expect(named({ OTEL_TRACES_SAMPLER: "jaeger_remote" })[0]).toMatch(/not one of always_on/);
    expect(named({ OTEL_TRACES_SAMPLER_ARG: "1.5" })[0]).toMatch(/ratio from 0 to 1/);
    expect(named({ OTEL_BSP_MAX_QUEUE_SIZE: "0" })[0]).toMatch(/whole number of 1 or more/);
    expect(named({ OTEL_TRACES_EXPORTER: "zipkin" })[0]).toMatch(/not available here/);
    expect(named({ OTEL_RESOURCE_ATTRIBUTES: "novalue" })[0]).toMatch(/not key=value/);
    expect(named({ OTEL_EXPORTER_OTLP_CERTIFICATE: "/no/such/ca.pem" })[0]).toMatch(/no such file/);
    expect(named({ HADIS_SPAN_SINK_RATE: "lots" })[0]).toMatch(/HADIS_SPAN_SINK_RATE/);
    expect(named({ OTEL_SDK_DISABLED: "yes", OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" })).toHaveLength(2);
  });
});

describe("a start with a telemetry variable it cannot use", () => {
  let server: LocalServer;
  const dataDir = mkdtempSync(join(tmpdir(), "hadis-otel-start-"));
  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    await stopSpawned();
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("`hadis serve` exits 2 naming OTEL_EXPORTER_OTLP_ENDPOINT before it joins, instead of serving no reply", async () => {
    const run = spawnHadis(["serve", "all", "--nats", server.url, "--workers", "1", "--wait-for-nats", "0"], {
      OTEL_EXPORTER_OTLP_ENDPOINT: "127.0.0.1:4599",
    });
    const code = await Promise.race([run.exited, new Promise((r) => setTimeout(() => r("still running"), 25_000))]);
    expect(code, run.output()).toBe(2);
    expect(run.output()).toMatch(/OTEL_EXPORTER_OTLP_ENDPOINT=127\.0\.0\.1:4599: .*http:\/\/127\.0\.0\.1:4599/);
    expect(run.output()).not.toMatch(/serving/i);
  }, 40_000);

  it("`hadis start --no-dashboard` refuses OTLP over gRPC by name", async () => {
    const port = await freePort();
    const run = spawnHadis(["start", "--port", String(port), "--no-dashboard", "--data-dir", dataDir, "--workers", "1"], {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4599",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
    });
    const code = await Promise.race([run.exited, new Promise((r) => setTimeout(() => r("still running"), 25_000))]);
    expect(code, run.output()).toBe(2);
    expect(run.output()).toMatch(/OTEL_EXPORTER_OTLP_PROTOCOL=grpc: OTLP over gRPC is not supported/);
  }, 40_000);
});

describe("an OTLP endpoint that cannot be used, reached at run time", () => {
  let t: TestSystem;
  const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  beforeAll(async () => {
    // As a library caller (or a process started without the check) reads it at first use.
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = "127.0.0.1:4599";
    t = await startTestSystem({ policy: "static" });
  });
  afterAll(async () => {
    await t?.stop();
    if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved;
    await shutdownTelemetry();
  });

  it("costs no reply: requests are answered, and the spans it could not export are counted", async () => {
    const lost = async () =>
      Number(/^hadis_trace_spans_lost_total\{reason="exporter_unavailable"\} (\S+)$/m.exec(await metricsText())?.[1] ?? 0);
    const replies = await Promise.all(
      Array.from({ length: 3 }, (_, i) => t.client.generate({ prompt: `a red bicycle ${i}`, deadlineMs: 10_000 })),
    );
    expect(replies.map((r) => r.requestId)).toHaveLength(3);
    expect(tracingEnabled()).toBe(true);
    expect(await lost()).toBeGreaterThanOrEqual(3);
  });
});
