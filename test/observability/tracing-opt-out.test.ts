/**
 * The dashboard turns tracing on for its waterfalls (`npm start`), unless the environment turns it
 * off: `HADIS_TRACING=off` or `OTEL_SDK_DISABLED=true` win, even with an OTLP endpoint set (the
 * dashboard's switch used to pick that endpoint up and export every span).
 */
import { afterEach, describe, expect, it } from "vitest";
import { subjects as buildSubjects } from "../../contracts/subjects.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { configureTelemetry, spanSinkEnabled, tracingEnabled } from "../../services/telemetry/tracing.ts";
import { startDashboard } from "../../services/dashboard/main.ts";
import { useNatsServer } from "../helpers/nats.ts";

const t = useNatsServer("tracing-opt-out");
const VARIABLES = ["HADIS_TRACING", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "HADIS_SPAN_SINK"] as const;
const saved = Object.fromEntries(VARIABLES.map((k) => [k, process.env[k]]));

afterEach(() => {
  for (const k of VARIABLES) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  configureTelemetry({ enabled: false });
});

/** Tracing (or, with `read`, another switch) in this process once a dashboard has started under `env` (the services' configuration read from it first). */
async function tracingUnder(
  env: Partial<Record<(typeof VARIABLES)[number], string>>,
  read: () => boolean = tracingEnabled,
): Promise<boolean> {
  for (const k of VARIABLES) delete process.env[k];
  Object.assign(process.env, env);
  configureTelemetry(); // from the environment, as a service process starts
  const dashboard = await startDashboard({ nc: t.nc, subjects: buildSubjects(), port: 0, log: createLogger("dashboard", "error") });
  try {
    return read();
  } finally {
    await dashboard.stop();
  }
}

describe("the dashboard and the environment's tracing switch", () => {
  it("turns tracing on when nothing says otherwise, and leaves it off when the environment says off", async () => {
    expect(await tracingUnder({})).toBe(true);
    expect(await tracingUnder({ HADIS_TRACING: "off" })).toBe(false);
    expect(await tracingUnder({ OTEL_SDK_DISABLED: "true" })).toBe(false);
    // Off despite a receiver: nothing exported either.
    expect(await tracingUnder({ HADIS_TRACING: "off", OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9/" })).toBe(false);
  });

  it("reads every spelling of off the same way, an OTLP endpoint set or not", async () => {
    for (const off of ["false", "0", "OFF"]) {
      expect(await tracingUnder({ HADIS_TRACING: off })).toBe(false);
      expect(await tracingUnder({ HADIS_TRACING: off, OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9/" })).toBe(false);
    }
  });

  it("feeds the dashboard's spans unless HADIS_SPAN_SINK says off (the dashboard's switch overrode it)", async () => {
    expect(await tracingUnder({}, spanSinkEnabled)).toBe(true);
    expect(await tracingUnder({ HADIS_SPAN_SINK: "off" }, spanSinkEnabled)).toBe(false);
    expect(await tracingUnder({ HADIS_SPAN_SINK: "off" })).toBe(true); // tracing itself stays on
  });
});
