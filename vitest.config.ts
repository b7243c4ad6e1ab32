import { defineConfig } from "vitest/config";

/**
 * Three projects:
 * - `unit`: pure code (actors, contracts, helpers) on simulated clocks and fakes, files in
 *   parallel; every test must assert (`expect.hasAssertions()`, test/helpers/has-assertions.ts).
 * - `integration`: real parts (a nats-server per file on a free port, onnxruntime on tiny models,
 *   HiGHS, child processes), two files at a time: each file has its own server and ports, and
 *   they mostly wait on timers and I/O (a serial run used half a core on average).
 * - `serial`: what measures timing under faults and load (fail-over gaps, overload, the whole
 *   system in processes, a browser), one file at a time, after the others.
 * A file belongs to `integration` or `serial` by the globs below; every other test is `unit`, and
 * test/layout/test-projects.test.ts checks that no unit file starts a server, a process or a thread.
 */
export const SERIAL = [
  "test/reliability/**/*.test.ts",
  "test/integration/processes.test.ts",
  "test/integration/restarts.test.ts",
  "test/integration/model-failures.test.ts",
  "test/observability/dashboard.browser.test.ts",
  "test/sim/bench-e1.test.ts",
];

export const INTEGRATION = [
  "test/integration/**/*.test.ts",
  "test/observability/{dashboard-http,metrics,otlp,otlp-trace,span-export-settings,telemetry-config,tracing,tracing-opt-out}.test.ts",
  "test/onnx/{backend,judge,pipeline,profile,sd3,setup,threaded}.test.ts",
  "test/ops/**/*.test.ts",
  "test/services/{cli-loads,cli-options,client,configuration,discriminator,health,highs-solver,manager,nats-private,nats-wait,replay,router-state,status,work-queue,worker-time-scale}.test.ts",
];

export default defineConfig({
  test: {
    // dist/ compiled once before any file runs: spawned commands run it (test/helpers/build-once.ts).
    globalSetup: ["test/helpers/build-once.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: [...INTEGRATION, ...SERIAL],
          setupFiles: ["test/helpers/has-assertions.ts"],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: INTEGRATION,
          exclude: SERIAL,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "serial",
          include: SERIAL,
          maxWorkers: 1,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
