/**
 * What tracing reads from the environment, read one way and checked before anything starts:
 * `hadis start` and `hadis serve` end with exit 2 naming the variable and what is wrong with it
 * (`telemetryEnvProblems`), so a bad endpoint never reaches the request path. The OTLP exporter
 * reads some of these itself (headers, timeout, compression, certificates): they are checked here
 * too, with the rules it applies.
 */
import { existsSync } from "node:fs";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from "@opentelemetry/sdk-trace-base";

type Env = Record<string, string | undefined>;

/** The OTLP/HTTP encodings this process exports (gRPC is refused at start). */
export type OtlpProtocol = "http/protobuf" | "http/json";

/** Sampler names of `OTEL_TRACES_SAMPLER` this process knows. */
export const SAMPLER_NAMES = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;

/** A variable's value as OpenTelemetry reads it: blank is unset. */
export function envValue(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

const lower = (env: Env, name: string) => envValue(env, name)?.toLowerCase();

/** `HADIS_TRACING` / `HADIS_SPAN_SINK`: on (`on`, `true`, `1`), off (`off`, `false`, `0`) or unset. */
export function hadisSwitch(env: Env, name: string): "on" | "off" | undefined {
  const v = lower(env, name);
  return v === "on" || v === "true" || v === "1" ? "on" : v === "off" || v === "false" || v === "0" ? "off" : undefined;
}

/** The OTLP/HTTP traces URL from the standard variables, or null (the traces variable is used as given; the base gets `/v1/traces`). */
export function otlpUrlFromEnv(env: Env = process.env): string | null {
  const traces = envValue(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (traces) return traces;
  const base = envValue(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  return base ? `${base.replace(/\/+$/, "")}/v1/traces` : null;
}

/** The OTLP encoding from `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf` by default, as the specification says). */
export function otlpProtocolFromEnv(env: Env = process.env): OtlpProtocol {
  const name = lower(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? lower(env, "OTEL_EXPORTER_OTLP_PROTOCOL");
  return name === "http/json" ? "http/json" : "http/protobuf";
}

/** Batch settings of the OTLP export (the batch span processor's). */
export interface BatchSettings {
  /** Spans waiting for export at most; beyond, spans are dropped and counted. */
  maxQueueSize: number;
  /** An export is sent once this many spans wait. */
  maxExportBatchSize: number;
  /** Waiting spans are sent at least this often, ms. */
  scheduledDelayMillis: number;
}

/**
 * Batch settings from `OTEL_BSP_*`, with defaults of our own: exports of up to 1,024 spans, at
 * least every second, and a queue of 8,192 (about a second of spans at 1,000 requests/s) to ride
 * out a slow collector. A value that is not a whole number in range keeps the default (a start
 * refuses it first: `telemetryEnvProblems`); a delay of 0 sends at the next turn of the event loop.
 */
export function batchSettings(vars: Env = process.env): BatchSettings {
  const env = (name: string, fallback: number, least: number) => {
    const v = Number(vars[name]);
    return vars[name]?.trim() && Number.isInteger(v) && v >= least ? v : fallback;
  };
  const maxQueueSize = env("OTEL_BSP_MAX_QUEUE_SIZE", 8_192, 1);
  return {
    maxQueueSize,
    maxExportBatchSize: Math.min(maxQueueSize, env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1_024, 1)),
    scheduledDelayMillis: env("OTEL_BSP_SCHEDULE_DELAY", 1_000, 0),
  };
}

/** The sampler named by `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default parentbased_always_on). */
export function samplerFromEnv(env: Env = process.env): Sampler {
  return samplerNamed(
    lower(env, "OTEL_TRACES_SAMPLER") ?? "parentbased_always_on",
    Number(envValue(env, "OTEL_TRACES_SAMPLER_ARG") ?? "1"),
  );
}

/** A sampler by its `OTEL_TRACES_SAMPLER` name and argument (a ratio, clamped to [0, 1]). */
export function samplerNamed(name: string, arg = 1): Sampler {
  const ratio = Number.isFinite(arg) ? Math.min(1, Math.max(0, arg)) : 1;
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** One variable that cannot be used, and why. */
export interface EnvProblem {
  variable: string;
  value: string;
  problem: string;
}

/** `name=value: problem`, as a start prints it. */
export function describeProblem(p: EnvProblem): string {
  return `${p.variable}=${p.value}: ${p.problem}`;
}

/** Why `value` is not an OTLP/HTTP endpoint, or null when it is one. */
function endpointProblem(value: string): string | null {
  const suggestion = /^[\w.-]+(:\d+)?(\/.*)?$/.test(value) ? ` (did you mean http://${value}?)` : "";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `not a URL: an OTLP/HTTP endpoint is http://host:port or https://host:port${suggestion}`;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return `scheme ${url.protocol.replace(/:$/, "")} is not one OTLP/HTTP uses: write http://host:port or https://host:port${suggestion}`;
  }
  if (!url.hostname) return "has no host";
  return null;
}

const WHOLE = /^\d+$/;

/**
 * Every telemetry variable this process reads that holds a value it cannot use: empty when all
 * are fine. `hadis start` and `hadis serve` print each (`describeProblem`) and exit 2 before
 * anything starts.
 */
export function telemetryEnvProblems(env: Env = process.env): EnvProblem[] {
  const problems: EnvProblem[] = [];
  const check = (variable: string, problemOf: (value: string) => string | null) => {
    const value = envValue(env, variable);
    if (value === undefined) return;
    const problem = problemOf(value);
    if (problem) problems.push({ variable, value, problem });
  };
  const oneOf = (allowed: readonly string[], extra?: (v: string) => string | null) => (value: string) =>
    extra?.(value.toLowerCase()) ?? (allowed.includes(value.toLowerCase()) ? null : `not one of ${allowed.join(", ")}`);
  const wholeAtLeast = (least: number) => (value: string) =>
    WHOLE.test(value) && Number(value) >= least ? null : `not a whole number ${least === 0 ? "(0 or more)" : `of ${least} or more`}`;

  check("OTEL_SDK_DISABLED", oneOf(["true", "false"]));
  check(
    "OTEL_TRACES_EXPORTER",
    oneOf(["otlp", "none"], (v) =>
      v === "otlp" || v === "none" ? null : `exporter "${v}" is not available here: otlp (OTLP/HTTP) or none`,
    ),
  );
  check("OTEL_EXPORTER_OTLP_ENDPOINT", endpointProblem);
  check("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpointProblem);
  for (const variable of ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]) {
    check(
      variable,
      oneOf(["http/protobuf", "http/json"], (v) =>
        v === "grpc"
          ? "OTLP over gRPC is not supported here: use http/protobuf (the default) or http/json, and the collector's OTLP/HTTP endpoint (port 4318 by default)"
          : null,
      ),
    );
  }
  check("OTEL_TRACES_SAMPLER", oneOf(SAMPLER_NAMES));
  check("OTEL_TRACES_SAMPLER_ARG", (v) =>
    Number.isFinite(Number(v)) && Number(v) >= 0 && Number(v) <= 1 ? null : "not a ratio from 0 to 1",
  );
  check("OTEL_BSP_SCHEDULE_DELAY", wholeAtLeast(0));
  check("OTEL_BSP_MAX_QUEUE_SIZE", wholeAtLeast(1));
  check("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", wholeAtLeast(1));
  check("OTEL_BSP_EXPORT_TIMEOUT", wholeAtLeast(1));
  for (const variable of ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"]) check(variable, wholeAtLeast(1));
  // Span limits, which the SDK's tracer provider reads.
  for (const limit of [
    "ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "ATTRIBUTE_COUNT_LIMIT",
    "SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "SPAN_ATTRIBUTE_COUNT_LIMIT",
    "SPAN_LINK_COUNT_LIMIT",
    "SPAN_EVENT_COUNT_LIMIT",
    "SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT",
    "SPAN_ATTRIBUTE_PER_LINK_COUNT_LIMIT",
  ]) {
    check(`OTEL_${limit}`, wholeAtLeast(0));
  }
  for (const variable of ["OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"])
    check(variable, oneOf(["gzip", "none"]));
  for (const variable of ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_RESOURCE_ATTRIBUTES"]) {
    check(variable, (v) => {
      for (const member of v.split(",")) {
        const at = member.indexOf("=");
        if (at <= 0 || !member.slice(0, at).trim()) return `"${member}" is not key=value (a comma-separated list of key=value)`;
        try {
          decodeURIComponent(member.slice(at + 1));
        } catch {
          return `the value of "${member.slice(0, at)}" is not valid percent-encoding`;
        }
      }
      return null;
    });
  }
  for (const kind of ["CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE"]) {
    for (const variable of [`OTEL_EXPORTER_OTLP_${kind}`, `OTEL_EXPORTER_OTLP_TRACES_${kind}`])
      check(variable, (v) => (existsSync(v) ? null : "no such file"));
  }
  for (const variable of ["HADIS_TRACING", "HADIS_SPAN_SINK"]) {
    check(variable, (v) => (hadisSwitch({ [variable]: v }, variable) ? null : "not one of on, off (or true, false, 1, 0)"));
  }
  check("HADIS_SPAN_SINK_RATE", (v) =>
    v.toLowerCase() === "all" || (Number.isFinite(Number(v)) && Number(v) >= 0)
      ? null
      : "not a number of traces a second (0 or more) or all",
  );
  return problems;
}
