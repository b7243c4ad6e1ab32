import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests each start their own nats-server and measure timing-sensitive things
    // (fail-over gaps, deadlines under load): on two cores they run one file at a time.
    maxWorkers: 1,
    fileParallelism: false,
  },
});
