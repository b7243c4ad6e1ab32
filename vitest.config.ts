import { defineConfig } from "vitest/config";

/**
 * Three projects:
 * - `unit`: pure code (actors, contracts, helpers) on simulated clocks and fakes; every test must
 *   assert (`expect.hasAssertions()`, test/helpers/has-assertions.ts).
 * - `integration`: real parts (a nats-server per file on a free port, onnxruntime on tiny models,
 *   HiGHS threads, child processes, injected faults). Each file has its own server and ports, and
 *   they mostly wait on timers and I/O (a serial run of everything used half a core on average),
 *   so they run with the unit files, three files at a time.
 * - `serial`: what measures time or capacity under load, or takes both cores itself (overload,
 *   cluster fail-over, the system as processes, ONNX workers failing, a browser): one file at a
 *   time, after the others.
 * A file belongs to `integration` or `serial` by the globs below; every other test is `unit`, and
 * test/layout/test-projects.test.ts checks that no unit file starts a server, a process or a thread.
 */
export const SERIAL = [
  "test/reliability/{overload,cluster}.test.ts",
  "test/integration/{processes,model-failures}.test.ts",
  "test/observability/dashboard.browser.test.ts",
];

export const INTEGRATION = [
  "test/integration/**/*.test.ts",
  "test/reliability/**/*.test.ts",
  "test/observability/{dashboard-http,metrics,otlp,otlp-trace,span-export-settings,telemetry-config,tracing,tracing-opt-out}.test.ts",
  "test/onnx/{backend,judge,pipeline,profile,sd3,setup,threaded}.test.ts",
  "test/ops/**/*.test.ts",
  "test/services/{cli-loads,cli-options,client,configuration,discriminator,health,highs-solver,manager,nats-private,nats-wait,replay,router-state,scorer-options,status,work-queue,worker-time-scale}.test.ts",
  "test/sim/bench-e1.test.ts",
];

/** Files at a time in the first group (unit and integration share it, so share the number). */
const WORKERS = 3;

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
          maxWorkers: WORKERS,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: INTEGRATION,
          exclude: SERIAL,
          maxWorkers: WORKERS,
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
