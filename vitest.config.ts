import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests each start their own nats-server; two cores cannot take many at once.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
