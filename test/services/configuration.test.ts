/**
 * Configuration read from the environment and the command line, checked before anything starts:
 * `hadis serve` takes its server from `--nats` or `NATS_URL` and refuses to guess one; a bad
 * `NATS_URL` or `HADIS_LOG` ends the command naming the variable (exit 2).
 */
import { describe, expect, it } from "vitest";
import { natsServerOf, natsUrls } from "../../services/cli/credentials.ts";
import { environmentProblems } from "../../services/cli/environment.ts";
import { useNatsServer } from "../helpers/nats.ts";
import { spawnHadis, stopSpawned, waitFor } from "../helpers/processes.ts";

const t = useNatsServer("configuration-test");

describe("where a command's NATS server comes from", () => {
  it("is --nats, else NATS_URL (empty is unset), else the tools' default; serve has no default", () => {
    expect(natsServerOf("nats://a:1", { NATS_URL: "nats://b:2" }, "nats://c:3")).toEqual({ value: "nats://a:1", source: "--nats" });
    expect(natsServerOf(undefined, { NATS_URL: "nats://b:2" }, "nats://c:3")).toEqual({ value: "nats://b:2", source: "NATS_URL" });
    expect(natsServerOf(undefined, { NATS_URL: "" }, "nats://c:3")).toEqual({ value: "nats://c:3", source: "the default" });
    expect(natsServerOf(undefined, {})).toBeUndefined();
    expect(() => natsUrls("foo://bar", "NATS_URL")).toThrow(
      'NATS_URL=foo://bar: "foo://bar" is not a NATS URL: nats://host:port, tls://host:port or host:port',
    );
    expect(() => natsUrls(" , ", "NATS_URL")).toThrow("NATS_URL= ,  names no server");
  });

  it("`hadis serve` without --nats or NATS_URL refuses to guess, exit 2; with NATS_URL it joins that server", async () => {
    const guess = spawnHadis(["serve", "router"], { NATS_URL: "" });
    expect(await guess.exited).toBe(2);
    expect(guess.output()).toContain(
      "hadis serve: no NATS server given: pass --nats nats://host:4222 (comma-separated for a cluster) or set NATS_URL; `npm start` runs a server of its own",
    );
    const bad = spawnHadis(["serve", "router"], { NATS_URL: "foo://bar" });
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toContain('hadis serve: NATS_URL=foo://bar: "foo://bar" is not a NATS URL');
    const joined = spawnHadis(["serve", "discriminator"], { NATS_URL: t.server.url });
    try {
      await waitFor(
        () => joined.output().includes(`hadis discriminator connected to ${t.server.url} (NATS_URL)`),
        20_000,
        "the discriminator joining",
      );
    } finally {
      await stopSpawned();
    }
  }, 40_000);

  it("a HADIS_LOG that is not a level ends any command before it starts, naming it", async () => {
    expect(environmentProblems({ HADIS_LOG: "warn" })).toEqual([]);
    expect(environmentProblems({ HADIS_LOG: "verbose" })).toEqual([
      "HADIS_LOG=verbose is not a log level: one of debug, info, warn, error, silent",
    ]);
    const status = spawnHadis(["status", "--nats", t.server.url], { HADIS_LOG: "verbose" });
    expect(await status.exited).toBe(2);
    expect(status.output()).toContain("hadis status: HADIS_LOG=verbose is not a log level");
  }, 20_000);
});
