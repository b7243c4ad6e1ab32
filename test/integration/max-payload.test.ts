/**
 * A NATS server whose max_payload is under an image (a stock server allows 1 MiB; a 1024² PNG is
 * often more): the request fails at once with `payload_too_large` saying what to set, instead of
 * its image being made, dropped, and the request waiting out its deadline. Here the limit is
 * 2 KB and the tiny ONNX models' 64×64 PNGs are about 3 KB.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mapWithBrokenExport } from "../helpers/tiny-models.ts";
import { stopStarted } from "../helpers/system.ts";
import { waitFor } from "../helpers/processes.ts";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { openPlanBucket } from "../../services/nats/kv-buckets.ts";
import { HadisClient } from "../../services/client/client.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import type { Logger } from "../../services/telemetry/log.ts";
import { encode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";
import { HadisError } from "../../contracts/errors.ts";

let server: LocalServer;
let system: RunningSystem;
let nc: NatsConnection;
const warnings: { event: string; fields: Record<string, unknown> }[] = [];
const log: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (event, fields = {}) => void warnings.push({ event, fields }),
  error: () => undefined,
};
const modelsDir = mkdtempSync(join(tmpdir(), "hadis-payload-"));

beforeAll(async () => {
  const modelMap = mapWithBrokenExport(modelsDir, "turbo", () => undefined);
  server = await startNatsServer({ extraConfig: "max_payload: 2048" });
  system = await startSystem({
    natsUrl: server.url,
    services: ["router", "worker"],
    workers: 1,
    workerIdPrefix: "small",
    backend: "onnx",
    onnx: { modelsDir, modelMap },
    workQueue: { storage: "memory" },
    log,
  });
  nc = await connectNats(server.url, "test");
  const plan: Plan = {
    v: PROTOCOL_VERSION,
    epoch: 1,
    policy: "test",
    issuedAtMs: Date.now(),
    sloMs: 60_000,
    timeScale: 1,
    pair: { light: "sdxl-lightning", heavy: "sd35-medium" },
    routerThreshold: 0,
    discThreshold: 0,
    heavyShare: 0,
    models: { "sdxl-lightning": { workers: 1, batchSize: 1 } },
    assignment: { "small-00": "sdxl-lightning" },
    reason: "test",
  };
  await (await openPlanBucket(nc, subjects())).put("current", encode(plan));
  const agent = system.workers!.agents[0];
  await waitFor(() => agent.status("x").state === "serving", 20_000, "the worker serving");
}, 60_000);

afterAll(() => stopStarted({ nc, system, server, dirs: [modelsDir] }));

describe("a server max_payload under an image", () => {
  it("is warned of at start, and a request fails at once with payload_too_large naming the setting", async () => {
    // Said once at start, by the services.
    expect(warnings.filter((w) => w.event === "nats.max_payload_small")).toHaveLength(1);
    expect(String(warnings.find((w) => w.event === "nats.max_payload_small")!.fields.message)).toMatch(/max_payload is 2048 bytes/);
    const started = Date.now();
    const err = await new HadisClient(nc).generate({ prompt: "a red bicycle", seed: 1, deadlineMs: 30_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HadisError);
    expect((err as HadisError).code).toBe("payload_too_large");
    expect((err as HadisError).message).toMatch(/over the NATS server's max_payload: set max_payload to 8388608/);
    expect(Date.now() - started).toBeLessThan(10_000); // not the 30 s deadline
  }, 40_000);
});
