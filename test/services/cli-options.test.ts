import { describe, expect, it } from "vitest";
import { atLeastOne, count, idPrefix, integerIn, nonNegative, num, port, text } from "../../services/cli/options.ts";
import { unreadOptions } from "../../services/cli/serve.ts";
import { spawnHadis } from "../helpers/processes.ts";

describe("CLI option parsers", () => {
  it("refuse empty and blank values instead of reading them as 0", () => {
    for (const parse of [num, count, port, atLeastOne]) {
      expect(() => parse("")).toThrow(/not a number/);
      expect(() => parse("  ")).toThrow(/not a number/);
    }
    expect(port("0")).toBe(0); // a free port, on purpose
  });

  it("want at least one worker or router", () => {
    expect(() => atLeastOne("0")).toThrow('"0" must be a whole number, 1 or more');
    expect(() => atLeastOne("-1")).toThrow('"-1" must be a whole number, 1 or more'); // (said "0 or more" of -1, refusing 0)
    expect(() => atLeastOne("2.5")).toThrow(/whole number/);
    expect(() => count("-3")).toThrow('"-3" must be a whole number, 0 or more'); // (it said "must be a whole number" of -3)
    expect(atLeastOne("16")).toBe(16);
  });

  it("hold deadlines, seeds, keys and worker id prefixes to what the system accepts, before anything is sent or started", () => {
    const deadline = integerIn(1, 600_000);
    expect(() => deadline("0")).toThrow("must be a whole number from 1 to 600,000");
    expect(() => deadline("2147488647")).toThrow(/from 1 to 600,000/); // would overflow the reply timer
    expect(deadline("600000")).toBe(600_000);
    // Out of range below or between: said with the range (it said only "must be a whole number").
    expect(() => deadline("-5")).toThrow("must be a whole number from 1 to 600,000");
    expect(() => deadline("2.5")).toThrow("must be a whole number from 1 to 600,000");
    const seed = integerIn(0, 2 ** 32 - 1);
    expect(() => seed("4294967296")).toThrow(/to 4,294,967,295/);
    expect(seed("0")).toBe(0);
    expect(() => text(128)("")).toThrow("must not be empty"); // an unset shell variable: no key at all, silently
    expect(() => text(128)("k".repeat(129))).toThrow("at most 128 characters");
    expect(() => idPrefix("gpu.node3")).toThrow(/one NATS subject token/);
    expect(() => idPrefix("node 3")).toThrow(/one NATS subject token/);
    expect(() => idPrefix("g".repeat(121))).toThrow(/at most 120/);
    expect(idPrefix("gpu-node3")).toBe("gpu-node3");
    expect(() => nonNegative("abc")).toThrow(/not a number/);
    expect(() => nonNegative("-1")).toThrow(/must not be negative/);
    expect(nonNegative("7.5")).toBe(7.5);
  });

  it("`serve` names each given option its service does not read, and the services that do", () => {
    const given = [
      { key: "workers", flag: "--workers" },
      { key: "timeScale", flag: "--time-scale" },
      { key: "nats", flag: "--nats" },
      { key: "scorer", flag: "--scorer" },
      { key: "storage", flag: "--storage" },
    ];
    expect(unreadOptions("router", given)).toEqual(["--workers does nothing for the router service (read by: worker)"]);
    expect(unreadOptions("discriminator", given)).toEqual([
      "--workers does nothing for the discriminator service (read by: worker)",
      "--scorer does nothing for the discriminator service (read by: router)",
      "--storage does nothing for the discriminator service (read by: router, worker, resource-manager)",
    ]);
    expect(unreadOptions("all", given)).toEqual([]);
    // The gateway reads its HTTP options (and the profiles, for /v1/models); the services do not.
    expect(unreadOptions("gateway", [...given, { key: "httpPort", flag: "--http-port" }, { key: "profiles", flag: "--profiles" }])).toEqual(
      [
        "--workers does nothing for the gateway service (read by: worker)",
        "--time-scale does nothing for the gateway service (read by: router, worker, discriminator, resource-manager)",
        "--scorer does nothing for the gateway service (read by: router)",
        "--storage does nothing for the gateway service (read by: router, worker, resource-manager)",
      ],
    );
    expect(unreadOptions("router", [{ key: "httpPort", flag: "--http-port" }])).toEqual([
      "--http-port does nothing for the router service (read by: gateway)",
    ]);
  });

  it('a mistake on the command line: one line and a hint, or with --json one {"error"} object on stdout', async () => {
    const plain = spawnHadis(["generate", "a dog", "--deadline-ms", "0"]);
    expect(await plain.exited).toBe(1);
    expect(plain.output()).toContain(
      `error: option '--deadline-ms <ms>' argument '0' is invalid. "0" must be a whole number from 1 to 600,000`,
    );
    expect(plain.output()).toContain("(add --help for the options)");
    expect(plain.output()).not.toContain("Usage:"); // the whole help scrolled the error away
    const json = spawnHadis(["generate", "a dog", "--deadline-ms", "0", "--json"]);
    expect(await json.exited).toBe(1);
    expect(JSON.parse(json.output().trim())).toEqual({
      error: {
        code: "client_error",
        retryable: false,
        message: `option '--deadline-ms <ms>' argument '0' is invalid. "0" must be a whole number from 1 to 600,000`,
      },
    });
    // A trace of 0 seconds was written, empty, with exit 0.
    const empty = spawnHadis([
      "trace",
      "--from-hourly",
      "profiles/reference/traces/none.csv",
      "--out",
      "/tmp/hadis-unwritten-trace.txt",
      "--seconds",
      "0",
    ]);
    expect(await empty.exited).toBe(1);
    expect(empty.output()).toContain(`error: option '--seconds <n>' argument '0' is invalid. "0" must be a whole number, 1 or more`);
  }, 30_000);
});
