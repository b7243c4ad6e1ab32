/** Finding nats-server: a version too old for the work queue's settings is refused by name, not run. */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { findNatsServer, parseNatsServerVersion } from "../../services/nats/server.ts";

const saved = process.env.NATS_SERVER_BIN;
afterEach(() => {
  if (saved === undefined) delete process.env.NATS_SERVER_BIN;
  else process.env.NATS_SERVER_BIN = saved;
});

/** A stand-in binary that prints `line` for `--version`. */
function fakeServer(line: string): { bin: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "hadis-fake-nats-"));
  const bin = join(dir, "nats-server");
  writeFileSync(bin, `#!/bin/sh\necho "${line}"\n`);
  chmodSync(bin, 0o755);
  return { bin, dir };
}

describe("findNatsServer", () => {
  it("reads the version line", () => {
    expect(parseNatsServerVersion("nats-server: v2.9.10\n")).toEqual([2, 9, 10]);
    expect(parseNatsServerVersion("nats-server: v2.10.22-RC.1")).toEqual([2, 10, 22]);
    expect(parseNatsServerVersion("no version here")).toBeNull();
  });

  it("refuses a server older than 2.9.0, naming it and what to do; takes 2.9.0 and later, and a newer one after an old one", () => {
    const old = fakeServer("nats-server: v2.8.4");
    const fine = fakeServer("nats-server: v2.10.1");
    try {
      expect(() => findNatsServer([old.bin])).toThrow(/nats-server 2\.8\.4; HADIS needs 2\.9\.0 or later .*NATS_SERVER_BIN/);
      expect(findNatsServer([fine.bin])).toBe(fine.bin);
      expect(findNatsServer([old.bin, fine.bin])).toBe(fine.bin);
      expect(findNatsServer(["/nonexistent/nats-server"])).toBeNull();
      // NATS_SERVER_BIN comes first in the default list; one that does not run is said, not passed over.
      process.env.NATS_SERVER_BIN = fine.bin;
      expect(findNatsServer()).toBe(fine.bin);
      process.env.NATS_SERVER_BIN = "/nonexistent/nats-server";
      expect(() => findNatsServer()).toThrow(
        /^NATS_SERVER_BIN=\/nonexistent\/nats-server is not a nats-server that runs \(spawnSync \/nonexistent\/nats-server ENOENT\)$/,
      );
    } finally {
      delete process.env.NATS_SERVER_BIN;
      for (const d of [old.dir, fine.dir]) rmSync(d, { recursive: true, force: true });
    }
  });
});
