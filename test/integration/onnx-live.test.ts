/**
 * The onnx backend live: workers run real ONNX pipelines (tiny generated models) behind the
 * router and the CLIP judge, and swap models when the plan changes. The test plays the resource
 * manager: it writes plans to the KV bucket as the manager would.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import { mapWithBrokenExport } from "../helpers/tiny-models.ts";
import { stopStarted } from "../helpers/system.ts";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inflateSync } from "node:zlib";
import { startNatsServer, type LocalServer } from "../../services/nats/server.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { openPlanBucket } from "../../services/nats/kv-buckets.ts";
import { HadisClient } from "../../services/client/client.ts";
import { startSystem, type RunningSystem } from "../../services/system.ts";
import { createLogger } from "../../services/telemetry/log.ts";
import { encode, parseRaw } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, type Plan } from "../../contracts/messages.ts";
import { subjects } from "../../contracts/subjects.ts";

let server: LocalServer;
let system: RunningSystem;
let nc: NatsConnection;
let client: HadisClient;
const modelsDir = mkdtempSync(join(tmpdir(), "hadis-onnx-"));

function plan(epoch: number, light: string, heavy: string, assignment: Record<string, string>, discThreshold = 0.5): Plan {
  return {
    v: PROTOCOL_VERSION,
    epoch,
    policy: "test",
    issuedAtMs: Date.now(),
    sloMs: 60_000,
    timeScale: 1,
    pair: { light, heavy },
    routerThreshold: 0,
    discThreshold,
    heavyShare: discThreshold,
    models: { [light]: { workers: 1, batchSize: 2 }, [heavy]: { workers: 1, batchSize: 2 } },
    assignment,
    reason: "test",
  };
}

async function publish(p: Plan) {
  const kv = await openPlanBucket(nc, subjects());
  await kv.put("current", encode(p));
}

async function until(check: () => boolean, ms = 20_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 50));
  }
}

function pngSize(bytes: Uint8Array) {
  const b = Buffer.from(bytes);
  expect(b.subarray(1, 4).toString()).toBe("PNG");
  const width = b.readUInt32BE(16);
  const height = b.readUInt32BE(20);
  return { width, height, idat: inflateSync(b.subarray(41, 41 + b.readUInt32BE(33))) };
}

beforeAll(async () => {
  // A model map with one broken export (its UNet is missing) besides the tiny stand-ins.
  const modelMap = mapWithBrokenExport(modelsDir, "turbo", (models) => (models.broken = { dir: "broken", steps: 1, guidanceScale: 0 }));
  server = await startNatsServer();
  system = await startSystem({
    natsUrl: server.url,
    services: ["router", "worker", "discriminator"],
    workers: 2,
    workerIdPrefix: "onnx",
    backend: "onnx",
    onnx: { modelsDir, modelMap },
    workQueue: { storage: "memory" },
    log: createLogger("test", "error"),
  });
  nc = await connectNats(server.url, "test");
  client = new HadisClient(nc);
}, 60_000);

afterAll(() => stopStarted({ nc, system, server, dirs: [modelsDir] }));

describe("onnx backend behind the router and judge", () => {
  it("serves real generated images, judged by the CLIP judge", async () => {
    await publish(plan(1, "sdxl-lightning", "sd35-medium", { "onnx-00": "sdxl-lightning", "onnx-01": "sd35-medium" }));
    await until(() => system.workers!.agents.every((a) => a.status("x").state === "serving"));
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) => client.generate({ prompt: `a photo of a cat ${i}`, seed: 100 + i, deadlineMs: 30_000 })),
    );
    for (const r of replies) {
      const { width, height, idat } = pngSize(r.image);
      expect([width, height]).toEqual([64, 64]);
      expect(idat.length).toBe((64 * 3 + 1) * 64);
      expect(["light", "light->heavy"]).toContain(r.route);
      expect(r.models.light).toBe("sdxl-lightning");
    }
  });

  it("swaps a worker's model when the plan changes and keeps serving", async () => {
    await publish(plan(2, "sd35-large-turbo", "sd35-medium", { "onnx-00": "sd35-large-turbo", "onnx-01": "sd35-medium" }, 0));
    const w0 = system.workers!.agents.find((a) => a.id === "onnx-00")!;
    await until(() => w0.status("x").model === "sd35-large-turbo" && w0.status("x").state === "serving");
    expect(w0.status("x").swapsTotal).toBe(1);
    const reply = await client.generate({ prompt: "a red bicycle", deadlineMs: 30_000 });
    expect(reply.route).toBe("light");
    expect(reply.servedBy).toBe("sd35-large-turbo");
    expect(reply.planEpoch).toBe(2);
    // Every image light here (threshold 0): same seed and prompt → the same bytes; another seed → another image.
    const a = await client.generate({ prompt: "a photo of a cat", seed: 5, deadlineMs: 30_000 });
    const b = await client.generate({ prompt: "a photo of a cat", seed: 5, deadlineMs: 30_000 });
    const c = await client.generate({ prompt: "a photo of a cat", seed: 6, deadlineMs: 30_000 });
    expect([a.servedBy, b.servedBy, c.servedBy]).toEqual(["sd35-large-turbo", "sd35-large-turbo", "sd35-large-turbo"]);
    expect(Buffer.from(a.image).equals(Buffer.from(b.image))).toBe(true);
    expect(Buffer.from(a.image).equals(Buffer.from(c.image))).toBe(false);
    // A stale epoch changes nothing.
    await publish(plan(1, "sdxl-lightning", "sd35-medium", { "onnx-00": "sdxl-lightning", "onnx-01": "sd35-medium" }));
    await new Promise((r) => setTimeout(r, 300));
    expect(w0.status("x").model).toBe("sd35-large-turbo");
  });

  it("a model folder missing a file fails at load with the file named; the worker stays up and reports it", async () => {
    const w1 = system.workers!.agents.find((a) => a.id === "onnx-01")!;
    await publish(plan(3, "sd35-large-turbo", "broken", { "onnx-00": "sd35-large-turbo", "onnx-01": "broken" }, 0));
    await until(() => w1.status("x").state === "failed");
    expect(w1.status("x").lastError).toMatch(/broken\/unet\/model\.onnx/);
    // The heartbeat carries the failure to the resource manager.
    const beat = await new Promise<Record<string, unknown>>((resolve) => {
      const sub = nc.subscribe("hadis.heartbeat.worker.onnx-01", {
        callback: (_e, m) => {
          sub.unsubscribe();
          resolve(parseRaw(m.data) as Record<string, unknown>);
        },
      });
    });
    expect(String(beat.lastError)).toMatch(/unet\/model\.onnx/);
    // Still alive: a plan that moves it back is followed.
    await publish(plan(4, "sd35-large-turbo", "sd35-medium", { "onnx-00": "sd35-large-turbo", "onnx-01": "sd35-medium" }, 0));
    await until(() => w1.status("x").state === "serving" && w1.status("x").model === "sd35-medium");
  });
});
