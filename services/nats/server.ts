/**
 * Starts and stops a local `nats-server` with JetStream (the embedded default of `npm start`,
 * and every integration test). The server is a child process in its own data folder.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { MAX_PAYLOAD_BYTES } from "../../contracts/envelope.ts";
import { ConfigurationError, DependencyError } from "../../contracts/errors.ts";

/** Where the server binary is looked up, in order. */
const candidates = () =>
  [process.env.NATS_SERVER_BIN, "nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].filter(
    Boolean,
  ) as string[];

/** Oldest nats-server the system works with: per-subject discard (a full model queue refuses, not drops), KV direct gets, the consumer-create API. */
export const MIN_NATS_SERVER = [2, 9, 0] as const;

/** The version a `nats-server --version` line names ("nats-server: v2.9.10"), or null. */
export function parseNatsServerVersion(text: string): [number, number, number] | null {
  const m = /v?(\d+)\.(\d+)\.(\d+)/.exec(text);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

const atLeast = (v: readonly number[], min: readonly number[]) =>
  v[0] !== min[0] ? v[0] > min[0] : v[1] !== min[1] ? v[1] > min[1] : v[2] >= min[2];

/** Path of a runnable nats-server, or null; throws for one older than `MIN_NATS_SERVER` (it would ignore settings the work queue relies on). */
export function findNatsServer(
  bins: readonly string[] = candidates(),
  chosen: string | undefined = process.env.NATS_SERVER_BIN,
): string | null {
  let tooOld: string | null = null;
  for (const bin of bins) {
    const r = spawnSync(bin, ["--version"], { encoding: "utf8" });
    // One named on purpose that does not run is said, not passed over for another.
    if (r.status !== 0 && bin === chosen)
      throw new ConfigurationError(
        `NATS_SERVER_BIN=${bin} is not a nats-server that runs (${r.error?.message ?? `\`${bin} --version\` exited ${r.status ?? r.signal}`})`,
      );
    if (r.status !== 0) continue;
    const version = parseNatsServerVersion(r.stdout ?? "");
    if (version && !atLeast(version, MIN_NATS_SERVER)) {
      tooOld ??= `${bin} is nats-server ${version.join(".")}`; // a newer one further down the list may do
      continue;
    }
    return bin;
  }
  if (tooOld)
    throw new DependencyError(
      `${tooOld}; HADIS needs ${MIN_NATS_SERVER.join(".")} or later (Debian 12's package is 2.9.10): install a newer one or point NATS_SERVER_BIN at it`,
    );
  return null;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** True when something already listens on the port. */
export async function portInUse(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(true));
    srv.listen(port, host, () => srv.close(() => resolve(false)));
  });
}

/** Options of a local server. */
export interface LocalServerOptions {
  /** Client port; 0 picks a free one. */
  port?: number;
  /** JetStream data folder; a temporary one (removed on stop) when absent. */
  dataDir?: string;
  /** Extra config text appended (cluster blocks, accounts). */
  extraConfig?: string;
  /** Server name (needed in clusters). */
  serverName?: string;
  /** Extra environment of the server process: values for `$NAME` references in the config (passwords). */
  env?: Record<string, string>;
  /** Receives the server's log output after start (e.g. to look for permission violations). */
  onLog?: (text: string) => void;
  /**
   * A session of its own (`hadis start`): a terminal's Ctrl-C signals the whole foreground group,
   * and the server must outlive the services' graceful stop (they stop it last). Either way the
   * server is killed when this process exits.
   */
  ownSession?: boolean;
}

/** A running local server. */
export interface LocalServer {
  url: string;
  port: number;
  dataDir: string;
  process: ChildProcess;
  /** The server an earlier start on this data dir left running when it was killed, stopped before this one started. */
  stoppedLeftover?: { pid: number };
  /** Stops the server (SIGTERM, then SIGKILL) and removes a temporary data folder. Never rejects. */
  stop(): Promise<void>;
  /** Kills the server at once (fault tests). */
  kill(signal?: NodeJS.Signals): void;
}

/** Starts nats-server with JetStream on 127.0.0.1. Throws a clear error if the port is taken or the binary is missing. */
export async function startNatsServer(opts: LocalServerOptions = {}): Promise<LocalServer> {
  const bin = findNatsServer();
  if (!bin)
    throw new DependencyError(
      "nats-server is not installed: run `apt-get install -y nats-server` (Debian) or put it on PATH / NATS_SERVER_BIN",
    );
  const temporary = !opts.dataDir;
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "hadis-nats-"));
  mkdirSync(dataDir, { recursive: true });
  const confPath = join(dataDir, "nats-server.conf");
  const pidPath = join(dataDir, "nats-server.pid");
  const ownerPath = join(dataDir, OWNER_FILE);
  // The data dir first: its own leftover (a start killed with SIGKILL) holds the port too.
  const stoppedLeftover = await claimDataDir(dataDir, confPath, pidPath, ownerPath);
  const port = opts.port && opts.port > 0 ? opts.port : await freePort();
  // A stopped leftover's listening socket can outlive the moment its process stopped counting as
  // running (exiting, its command line already gone): give the port a few seconds to come free.
  if (stoppedLeftover && opts.port) for (let i = 0; i < 50 && (await portInUse(port)); i++) await new Promise((r) => setTimeout(r, 100));
  if (opts.port && (await portInUse(port))) {
    const leftover = leftoverOnPort(port);
    throw new ConfigurationError(
      leftover
        ? `port ${port} on 127.0.0.1 is already in use by nats-server pid ${leftover.pid}, left running by an earlier start on data dir ${leftover.dataDir} that was killed: stop it (kill ${leftover.pid}), start on that data dir (--data-dir ${leftover.dataDir}: the start stops it), or pick another port with --port`
        : `port ${port} on 127.0.0.1 is already in use: pick another with --port, or stop what listens there`,
    );
  }
  writeFileSync(
    confPath,
    [
      `listen: "127.0.0.1:${port}"`,
      opts.serverName ? `server_name: "${opts.serverName}"` : "",
      `max_payload: ${MAX_PAYLOAD_BYTES}`,
      `jetstream { store_dir: "${join(dataDir, "jetstream")}" }`,
      opts.extraConfig ?? "",
    ].join("\n"),
  );
  const child = spawn(bin, ["-c", confPath], {
    stdio: ["ignore", "ignore", "pipe"],
    env: opts.env ? { ...process.env, ...opts.env } : process.env,
    detached: opts.ownSession ?? false,
  });
  writeFileSync(pidPath, String(child.pid ?? ""));
  // Who started it: a server whose parent is no longer this process is a leftover of a killed start.
  writeFileSync(ownerPath, String(process.pid));
  // Whatever ends this process (an exception, a signal handled by exiting), the server goes too.
  const killOnExit = () => void child.kill("SIGKILL");
  process.on("exit", killOnExit);
  let log = "";
  const cleanUp = () => {
    child.kill("SIGKILL");
    process.off("exit", killOnExit);
    rmSync(pidPath, { force: true });
    rmSync(ownerPath, { force: true });
    if (temporary) rmSync(dataDir, { recursive: true, force: true });
  };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanUp();
      reject(new DependencyError(`nats-server did not start within 10 s:\n${log}`));
    }, 10_000);
    child.stderr!.on("data", (chunk: Buffer) => {
      log += chunk.toString();
      if (log.includes("Server is ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      cleanUp();
      reject(new DependencyError(`nats-server exited with code ${code}:\n${log}`));
    });
  });
  child.stderr!.removeAllListeners("data");
  if (opts.onLog) child.stderr!.on("data", (chunk: Buffer) => opts.onLog!(chunk.toString()));
  child.stderr!.resume();
  child.removeAllListeners("exit");
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    dataDir,
    process: child,
    kill: (signal = "SIGKILL") => void child.kill(signal),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const t = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(t);
      }
      process.off("exit", killOnExit);
      rmSync(pidPath, { force: true });
      rmSync(ownerPath, { force: true });
      if (temporary) rmSync(dataDir, { recursive: true, force: true });
    },
    ...(stoppedLeftover ? { stoppedLeftover } : {}),
  };
}

/** Next to the pid file: the pid of the process that started the server. */
const OWNER_FILE = "nats-server.owner";

/** The parent pid and run state of a process, from /proc; null when it is gone (or there is no /proc). */
function procStat(pid: number): { ppid: number; zombie: boolean } | null {
  try {
    // pid (comm) state ppid …: the command name may hold spaces and parentheses, so read after its last ")".
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(ppid), zombie: state === "Z" };
  } catch {
    return null;
  }
}

/** Whether `pid` runs (a zombie, dead and not yet reaped, does not). */
function running(pid: number): boolean {
  const stat = procStat(pid);
  if (stat) return !stat.zombie;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A pid written in `path`, or null. */
function pidIn(path: string): number | null {
  try {
    const pid = Number(readFileSync(path, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Whether the server `pid`, whose start recorded `ownerPath`, was left by a start that is gone: its
 * parent is no longer that start's process (a killed parent's children are handed to another).
 * Unknown (no owner recorded, no /proc): false, taken as in use.
 */
function orphaned(pid: number, ownerPath: string): boolean {
  const owner = pidIn(ownerPath);
  const stat = procStat(pid);
  return owner !== null && stat !== null && stat.ppid !== owner;
}

/** Stops a leftover server (SIGTERM: JetStream flushes its store; SIGKILL after 10 s); resolves once it is gone. */
async function stopLeftover(pid: number): Promise<void> {
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(pid, sig);
    } catch {
      // gone already
    }
  };
  signal("SIGTERM");
  const end = Date.now() + 10_000;
  while (running(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  if (running(pid)) signal("SIGKILL");
  for (let i = 0; i < 20 && running(pid); i++) await new Promise((r) => setTimeout(r, 100));
}

/**
 * Takes the data dir for a new server. A running nats-server of ours on it (its pid file names the
 * process, whose command line names this dir's config: a pid since reused by another program does
 * not count) is refused while the start that runs it lives (two servers on one JetStream store
 * would write the same files), and stopped when that start was killed: it is this data dir's
 * leftover, which would hold the port and the store with nobody to stop it. Resolves with the
 * leftover it stopped.
 */
async function claimDataDir(dataDir: string, confPath: string, pidPath: string, ownerPath: string): Promise<{ pid: number } | undefined> {
  const pid = pidIn(pidPath);
  if (pid === null || !running(pid)) return undefined; // nobody runs here (killed, the machine restarted)
  let commandLine: string;
  try {
    commandLine = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    commandLine = confPath; // alive, and no /proc to say what it runs: take it as ours
  }
  if (!commandLine.includes(confPath)) return undefined;
  if (orphaned(pid, ownerPath)) {
    await stopLeftover(pid);
    return { pid };
  }
  throw new ConfigurationError(
    `data dir ${dataDir} is in use by nats-server pid ${pid} (another \`npm start\`?): give this one its own with --data-dir, or stop that one (${pidPath} names it; delete that file if pid ${pid} is not a nats-server of this data dir)`,
  );
}

/** A nats-server of ours listening on `port` that a killed start left running, or null (found through /proc). */
export function leftoverOnPort(port: number): { pid: number; dataDir: string } | null {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((p) => /^\d+$/.test(p));
  } catch {
    return null;
  }
  for (const p of pids) {
    try {
      const args = readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0");
      const conf = args[args.indexOf("-c") + 1];
      if (!args[0]?.includes("nats-server") || !conf?.endsWith("/nats-server.conf")) continue;
      if (!readFileSync(conf, "utf8").includes(`listen: "127.0.0.1:${port}"`)) continue;
      const dataDir = dirname(conf);
      if (orphaned(Number(p), join(dataDir, OWNER_FILE))) return { pid: Number(p), dataDir };
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return null;
}
