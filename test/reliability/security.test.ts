/**
 * Per-role NATS permissions (ops/nats/accounts.conf): the whole system works with a user per
 * service, and each role is refused what it has no business doing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Packr } from "msgpackr";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PermissionViolationError } from "@nats-io/nats-core";
import { generateCredentials, roleEnv, secureConfigText, startSecureServer, type Role, type SecureServer } from "../helpers/secure.ts";
import { findNatsServer, startNatsServer } from "../../services/nats/server.ts";
import { promptsByRoute } from "../helpers/prompts.ts";
import { connectNats, type NatsConnection } from "../../services/nats/connection.ts";
import { HadisClient } from "../../services/client/client.ts";
import type { RunningSystem } from "../../services/system.ts";
import { pingServices, startTestServices } from "../helpers/system.ts";
import { DEFAULT_STATIC } from "../../services/resource-manager/policies.ts";
import { inboxPrefixOf, ServiceNames } from "../../contracts/subjects.ts";
import { decode } from "../../contracts/envelope.ts";
import { PlanSchema } from "../../contracts/messages.ts";

const packr = new Packr({ useRecords: false });
let secure: SecureServer;
let system: RunningSystem;
const open: NatsConnection[] = [];

async function as(role: Role): Promise<{ nc: NatsConnection; violations: PermissionViolationError[] }> {
  const nc = await secure.connectAs(role);
  open.push(nc);
  const violations: PermissionViolationError[] = [];
  void (async () => {
    for await (const s of nc.status()) if (s.type === "error" && s.error instanceof PermissionViolationError) violations.push(s.error);
  })();
  return { nc, violations };
}

/** Waits until the server refused `operation` on `subject` for this connection. */
async function refused(violations: PermissionViolationError[], operation: "publish" | "subscription", subject: string): Promise<void> {
  const end = Date.now() + 3_000;
  while (Date.now() < end) {
    if (violations.some((v) => v.operation === operation && v.subject === subject)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(
    `no permission violation for ${operation} ${subject}; saw ${violations.map((v) => `${v.operation} ${v.subject}`).join(", ") || "none"}`,
  );
}

beforeAll(async () => {
  secure = await startSecureServer();
  // Judge requests go through the discriminator (workers judge nothing): its permissions are tested too.
  system = await startTestServices(secure.server.url, { credentials: (kind) => secure.serviceCredentials(kind), judgeOnWorker: false });
});

afterAll(async () => {
  await Promise.all(open.map((nc) => nc.close().catch(() => undefined)));
  await system?.stop(2_000);
  await secure?.server.stop();
});

describe("per-role permissions", () => {
  it("serves a client user through every route with each service on its own role", async () => {
    const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
    const { nc, violations } = await as("client");
    const client = new HadisClient(nc);
    const light = await client.generate({ prompt: routes.light, deadlineMs: 20_000 });
    const heavy = await client.generate({ prompt: routes.heavy, deadlineMs: 20_000 });
    const escalated = await client.generate({ prompt: routes.escalated, deadlineMs: 20_000 });
    expect([light.route, heavy.route, escalated.route]).toEqual(["light", "heavy", "light->heavy"]);
    const many = await Promise.all(
      Array.from({ length: 40 }, (_, i) => client.generate({ prompt: `a photo of thing ${i}`, deadlineMs: 20_000 })),
    );
    expect(many.every((r) => r.image.byteLength > 0)).toBe(true);
    expect(violations).toEqual([]);
    // No service role hit a permission it lacks while serving (the server logs every violation).
    expect(secure.violations()).toEqual([]);
  });

  it("a client user submits a job and reads its events from the jobs stream, and asks for the plan in force", async () => {
    const { nc, violations } = await as("client");
    const client = new HadisClient(nc);
    const accepted = await client.submitJob({ prompt: "a red bicycle", deadlineMs: 20_000 });
    const kinds: string[] = [];
    for await (const e of client.job(accepted.jobId)) kinds.push(e.kind);
    expect(kinds.at(-1)).toBe("done");
    const again: string[] = [];
    for await (const e of client.job(accepted.jobId, { follow: false })) again.push(e.kind);
    expect(again).toEqual(kinds);
    const plan = await nc.request("hadis.manager.plan", new Uint8Array(), { timeout: 2_000 });
    expect(plan.data.byteLength).toBeGreaterThan(0);
    expect(violations).toEqual([]);
    expect(secure.violations()).toEqual([]);
  });

  it("an observer sees every service on $SRV.PING; a client cannot ask", async () => {
    const { nc } = await as("observer");
    expect(await pingServices(nc)).toEqual(Object.values(ServiceNames).sort());
    const c = await as("client");
    c.nc.publish("$SRV.PING", new Uint8Array(), { reply: `_INBOX.ping.${Date.now()}` });
    await refused(c.violations, "publish", "$SRV.PING");
  });

  it("a client may not enqueue work, read work or results, or call the JetStream API", async () => {
    const admin = await as("admin");
    const leaked: string[] = [];
    admin.nc.subscribe("hadis.work.sd35-large", { callback: (_e, m) => void leaked.push(m.subject) });
    await admin.nc.flush();
    const { nc, violations } = await as("client");
    nc.publish("hadis.work.sd35-large", packr.pack({ evil: true }));
    await refused(violations, "publish", "hadis.work.sd35-large");
    nc.subscribe("hadis.work.>");
    await refused(violations, "subscription", "hadis.work.>");
    nc.subscribe("hadis.result.>");
    await refused(violations, "subscription", "hadis.result.>");
    nc.publish("hadis.judge", packr.pack({}));
    await refused(violations, "publish", "hadis.judge");
    nc.publish("$JS.API.STREAM.DELETE.HADIS_WORK", new Uint8Array());
    await refused(violations, "publish", "$JS.API.STREAM.DELETE.HADIS_WORK");
    nc.publish("$KV.hadis-plan.current", packr.pack({ epoch: 1e9 }));
    await refused(violations, "publish", "$KV.hadis-plan.current");
    await admin.nc.flush();
    expect(leaked).toEqual([]);
    expect(secure.log()).toMatch(/Publish Violation.*hadis-client.*hadis\.work\.sd35-large/);
  });

  it("a client reads no service's inbox traffic (pulls, watches, replies); a role reads no other role's inboxes", async () => {
    const routes = promptsByRoute(DEFAULT_STATIC.light, DEFAULT_STATIC.routerThreshold, DEFAULT_STATIC.discThreshold);
    const snoop = await as("client");
    const seen: string[] = [];
    snoop.nc.subscribe("_INBOX.>", { callback: (_e, m) => void seen.push(m.subject) });
    await snoop.nc.flush();
    // Through every service: a pull delivery to a worker, a judge request, plan watches.
    const asker = await as("client");
    const client = new HadisClient(asker.nc);
    const replies = [
      await client.generate({ prompt: routes.escalated, deadlineMs: 20_000 }),
      await client.generate({ prompt: routes.heavy, deadlineMs: 20_000 }),
    ];
    expect(replies.map((r) => r.route)).toEqual(["light->heavy", "heavy"]);
    await snoop.nc.flush();
    // Only the two replies to the other client's requests (the same user shares `_INBOX.>`).
    expect(seen).toHaveLength(2);
    expect(snoop.violations).toEqual([]);
    for (const role of ["worker", "router", "discriminator", "resource-manager", "observer"] as const) {
      snoop.nc.subscribe(`${inboxPrefixOf(role)}.>`);
      await refused(snoop.violations, "subscription", `${inboxPrefixOf(role)}.>`);
    }
    const worker = await as("worker");
    worker.nc.subscribe("_INBOX_router.>");
    await refused(worker.violations, "subscription", "_INBOX_router.>");
    worker.nc.subscribe("_INBOX.>");
    await refused(worker.violations, "subscription", "_INBOX.>");
  });

  it("a router may read a stored result and a queued item (a keyed retry checks both)", async () => {
    const { Kvm } = await import("@nats-io/kv");
    const { WorkQueue, DEFAULT_WORK_QUEUE } = await import("../../services/nats/work-queue.ts");
    const { subjects } = await import("../../contracts/subjects.ts");
    const r = await as("router");
    const results = await new Kvm(r.nc).open("hadis-results");
    expect(await results.get("k-none.light")).toBeNull();
    const queue = await WorkQueue.open(r.nc, subjects(), { ...DEFAULT_WORK_QUEUE, storage: "memory" }); // as the test services made it
    expect(await queue.itemAt(1e9)).toBeNull();
    await r.nc.flush();
    expect(r.violations).toEqual([]);
  });

  it("a router records what an idempotency key is for (any router then refuses it for another prompt), and writes no image", async () => {
    const { Kvm } = await import("@nats-io/kv");
    const { claimKeyFor } = await import("../../services/router/idempotency.ts");
    const { claimKey, fingerprintOf, keyedRequestId, resultKey } = await import("../../actors/request/idempotent.ts");
    const r = await as("router");
    const results = await new Kvm(r.nc).open("hadis-results");
    const requestId = keyedRequestId("claim-test", fingerprintOf("a red bicycle", undefined));
    await claimKeyFor(results, "claim-test", fingerprintOf("a red bicycle", undefined));
    expect(await results.get(claimKey("claim-test"))).not.toBeNull();
    const other = await as("router");
    await expect(
      claimKeyFor(await new Kvm(other.nc).open("hadis-results"), "claim-test", fingerprintOf("a blue bicycle", undefined)),
    ).rejects.toMatchObject({ code: "invalid_request" });
    await r.nc.flush();
    expect(r.violations).toEqual([]);
    // Images are the workers' to store.
    r.nc.publish(`$KV.hadis-results.${resultKey(requestId, "light")}`, new Uint8Array([1]));
    await refused(r.violations, "publish", `$KV.hadis-results.${resultKey(requestId, "light")}`);
  });

  it("only the resource manager writes the plan", async () => {
    const epoch = system.manager!.plans.current!.epoch;
    // A plan the routers would take, were it stored (a payload that fails the plan schema is dropped by them anyway).
    const forged = packr.pack({ ...system.manager!.plans.current!, epoch: epoch + 1000 });
    expect(decode(PlanSchema, forged, "plan").epoch).toBe(epoch + 1000);
    for (const role of ["worker", "router", "discriminator"] as const) {
      const { nc, violations } = await as(role);
      nc.publish("$KV.hadis-plan.current", forged);
      await refused(violations, "publish", "$KV.hadis-plan.current");
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(system.routers[0].plans.current!.epoch).toBeLessThan(epoch + 1000);
  });

  it("only routers publish to work queues; workers cannot delete queued work", async () => {
    for (const role of ["discriminator", "worker", "resource-manager", "observer"] as const) {
      const { nc, violations } = await as(role);
      nc.publish("hadis.work.sd35-medium", packr.pack({}));
      await refused(violations, "publish", "hadis.work.sd35-medium");
    }
    const w = await as("worker");
    w.nc.publish("$JS.API.STREAM.MSG.DELETE.HADIS_WORK", new Uint8Array());
    await refused(w.violations, "publish", "$JS.API.STREAM.MSG.DELETE.HADIS_WORK");
    w.nc.subscribe("hadis.generate");
    await refused(w.violations, "subscription", "hadis.generate");
  });

  it("a router cannot impersonate a worker's heartbeat or a discriminator", async () => {
    const { nc, violations } = await as("router");
    nc.publish("hadis.heartbeat.worker.fake-00", packr.pack({}));
    await refused(violations, "publish", "hadis.heartbeat.worker.fake-00");
    nc.subscribe("hadis.judge", { queue: "hadis-discriminator" });
    await refused(violations, "subscription", "hadis.judge");
  });

  it("refuses a wrong password and an anonymous connection", async () => {
    await expect(
      connectNats(secure.server.url, "intruder", { user: "hadis-client", pass: "wrong", maxReconnectAttempts: 0, reconnect: false }),
    ).rejects.toThrow(/auth/i);
    await expect(connectNats(secure.server.url, "anonymous", { maxReconnectAttempts: 0, reconnect: false })).rejects.toThrow(/auth/i);
  });
});

/** A folder with a self-signed certificate for 127.0.0.1 and localhost (`cert.pem`, `key.pem`); openssl makes it. */
function selfSignedCertificate(): string {
  const dir = mkdtempSync(join(tmpdir(), "hadis-tls-"));
  const made = spawnSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ],
    { encoding: "utf8" },
  );
  if (made.status !== 0)
    throw new Error(`openssl could not make a test certificate (apt-get install openssl): ${made.error?.message ?? made.stderr}`);
  return dir;
}

describe("the operator configs", () => {
  it("ops/nats/secure.conf and the cluster node configs are valid with the role variables set, and refused without", () => {
    const { env } = generateCredentials();
    for (const file of ["secure.conf", "cluster-node1.conf", "cluster-node2.conf", "cluster-node3.conf"]) {
      const path = fileURLToPath(new URL(`../../ops/nats/${file}`, import.meta.url));
      const ok = spawnSync(findNatsServer()!, ["-t", "-c", path], { env: { ...process.env, ...env }, encoding: "utf8" });
      expect(ok.stderr + ok.stdout).toMatch(/is valid/);
      const { HADIS_ADMIN_NATS_PASS: _dropped, ...missing } = env;
      const refused = spawnSync(findNatsServer()!, ["-t", "-c", path], { env: { ...process.env, ...missing }, encoding: "utf8" });
      expect(refused.status).not.toBe(0);
    }
  });

  it("the documented tls {} block serves tls:// clients with a role user", async () => {
    const dir = selfSignedCertificate();
    const { credentials, env } = generateCredentials();
    const tls = `tls {\n  cert_file: "${join(dir, "cert.pem")}"\n  key_file: "${join(dir, "key.pem")}"\n  timeout: 2\n}`;
    const server = await startNatsServer({ env, extraConfig: secureConfigText(tls) });
    try {
      const nc = await connectNats(`tls://127.0.0.1:${server.port}`, "tls-client", {
        user: credentials.client.user,
        pass: credentials.client.pass,
        tls: { caFile: join(dir, "cert.pem") },
      });
      expect(nc.info?.tls_required).toBe(true);
      await nc.close();
      await expect(
        connectNats(server.url, "plain", { user: credentials.client.user, pass: credentials.client.pass, tls: null, reconnect: false }),
      ).rejects.toThrow();
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the CLI takes its CA and client certificate from HADIS_NATS_TLS_* (mutual TLS, verify: true), and says what is wrong without them", async () => {
    const dir = selfSignedCertificate();
    const { credentials, env } = generateCredentials();
    const [cert, key] = [join(dir, "cert.pem"), join(dir, "key.pem")];
    const tls = `tls {\n  cert_file: "${cert}"\n  key_file: "${key}"\n  ca_file: "${cert}"\n  verify: true\n  timeout: 2\n}`;
    const { spawnHadis } = await import("../helpers/processes.ts");
    const server = await startNatsServer({ env, extraConfig: secureConfigText(tls) });
    const observer = { [roleEnv("observer").user]: credentials.observer.user, [roleEnv("observer").pass]: credentials.observer.pass };
    const status = async (tlsEnv: Record<string, string>) => {
      const run = spawnHadis(["status", "--json", "--nats", `tls://127.0.0.1:${server.port}`], {
        ...observer,
        ...tlsEnv,
        HADIS_LOG: "error",
      });
      return { code: await run.exited, output: run.output() };
    };
    try {
      // Connected and read the (empty) system: no resource manager answers, exit 2.
      const mutual = await status({ HADIS_NATS_TLS_CA: cert, HADIS_NATS_TLS_CERT: cert, HADIS_NATS_TLS_KEY: key });
      expect(mutual.code).toBe(2);
      expect(JSON.parse(mutual.output.trim().split("\n").at(-1)!)).toMatchObject({ manager: false });
      // Trusting the server is not enough when it verifies clients.
      const noCertificate = await status({ HADIS_NATS_TLS_CA: cert });
      expect(noCertificate.code).toBe(1);
      expect(noCertificate.output).toMatch(/cannot reach NATS/);
      const half = await status({ HADIS_NATS_TLS_CA: cert, HADIS_NATS_TLS_CERT: cert });
      expect(half.code).toBe(1);
      expect(half.output).toMatch(/HADIS_NATS_TLS_CERT and HADIS_NATS_TLS_KEY go together: HADIS_NATS_TLS_KEY is not set/);
      const missing = await status({ HADIS_NATS_TLS_CA: join(dir, "nope.pem") });
      expect(missing.output).toMatch(/HADIS_NATS_TLS_CA=.*nope\.pem: no such file/);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);
});
