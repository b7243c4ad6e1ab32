/**
 * The deployment files (Dockerfile, ops/compose, ops/k8s), which no container engine runs here:
 * every manifest parsed (the `yaml` package), and its commands, ports, probes and environment
 * checked against the CLI's own options (`hadis serve --help`), the build's output, the names the
 * code reads and the subjects the services use.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { subjects } from "../../contracts/subjects.ts";
import { MAX_PAYLOAD_BYTES } from "../../contracts/envelope.ts";
import { SERVICE_KINDS } from "../../services/system.ts";
import { loadProfiles } from "../../services/files/profiles.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const read = (...path: string[]) => readFileSync(join(ROOT, ...path), "utf8");
const KINDS = [...SERVICE_KINDS, "gateway"];

/** `hadis serve`'s options: flag → whether it takes a value. */
let serveFlags: Map<string, boolean>;

beforeAll(() => {
  const help = spawnSync(process.execPath, ["dist/services/cli/main.js", "serve", "--help"], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
  });
  expect(help.status, help.stderr).toBe(0);
  serveFlags = new Map([...help.stdout.matchAll(/^\s+(?:-\w, )?(--[a-z][a-z-]*)( <[^>]+>)?/gm)].map((m) => [m[1], m[2] !== undefined]));
  expect(serveFlags.get("--nats")).toBe(true);
}, 60_000);

/** Checks `serve <kind> …` against the CLI: a known kind, known flags, a value after each flag that takes one. Returns the flags' values. */
function serveArgs(args: unknown, where: string): { kind: string; flags: Map<string, string | true> } {
  expect(Array.isArray(args), `${where}: args are a list`).toBe(true);
  const list = (args as unknown[]).map(String);
  expect(list[0], `${where}: runs serve`).toBe("serve");
  expect(KINDS, `${where}: a service kind`).toContain(list[1]);
  const flags = new Map<string, string | true>();
  for (let i = 2; i < list.length; i++) {
    const flag = list[i];
    expect(serveFlags.has(flag), `${where}: ${flag} is an option of hadis serve`).toBe(true);
    if (serveFlags.get(flag)) {
      const value = list[++i];
      expect(value !== undefined && !value.startsWith("--"), `${where}: ${flag} has a value`).toBe(true);
      flags.set(flag, value);
    } else flags.set(flag, true);
  }
  return { kind: list[1], flags };
}

/** The environment variables the code reads: every HADIS_ and OTEL_ name in its source, and the per-role NATS users. */
function knownVariables(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) for (const m of read(path).matchAll(/\b(?:HADIS|OTEL)_[A-Z0-9_]*[A-Z0-9]\b/g)) names.add(m[0]);
    }
  };
  walk("services");
  for (const role of [...SERVICE_KINDS, "client", "observer"])
    for (const part of ["USER", "PASS"]) names.add(`HADIS_${role.toUpperCase().replace(/-/g, "_")}_NATS_${part}`);
  return names;
}

/** The port a `serve` process answers its probes on: the gateway's HTTP port, else its metrics port. */
function probePort(kind: string, flags: Map<string, string | true>): number {
  const port = kind === "gateway" ? flags.get("--http-port") : flags.get("--metrics-port");
  expect(port, `${kind} serves its probes on a port it is given`).toBeDefined();
  return Number(port);
}

describe("Dockerfile", () => {
  const lines = read("Dockerfile")
    .split("\n")
    .filter((l) => l.trim() && !l.trim().startsWith("#"));
  const stages = lines.filter((l) => /^FROM /i.test(l));
  const last = lines.slice(lines.lastIndexOf(stages.at(-1)!));

  it("builds in one stage and runs the compiled CLI in another, as a non-root user", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(stages[0]).toMatch(/ AS build$/);
    const user = last.find((l) => /^USER /.test(l))?.split(/\s+/)[1];
    expect(user).toBeDefined();
    expect(["root", "0"]).not.toContain(user);
    // The build script exists, and its compiled entry point is what the image runs.
    const pkg = JSON.parse(read("package.json")) as { scripts: Record<string, string> };
    expect(lines.some((l) => l.includes("npm run build"))).toBe(true);
    expect(pkg.scripts.build).toBeDefined();
    const build = JSON.parse(read("tsconfig.build.json").replace(/^\s*\/\/.*$/gm, "")) as {
      compilerOptions: { outDir: string; rootDir?: string };
    };
    const entry = JSON.parse(last.find((l) => l.startsWith("ENTRYPOINT "))!.slice("ENTRYPOINT ".length)) as string[];
    expect(entry[0]).toBe("node");
    expect(entry[1]).toBe(join(build.compilerOptions.outDir.replace(/^\.\//, ""), "services/cli/main.js"));
    expect(existsSync(join(ROOT, "services/cli/main.ts"))).toBe(true);
    // Everything it copies from the repository exists.
    for (const l of lines.filter((x) => /^COPY /.test(x) && !x.includes("--from="))) {
      for (const src of l.split(/\s+/).slice(1, -1)) expect(existsSync(join(ROOT, src)), `COPY ${src}`).toBe(true);
    }
  });
});

describe("ops/compose", () => {
  const compose = parse(read("ops/compose/compose.yaml"), { merge: true }) as {
    services: Record<
      string,
      { command?: string[]; environment?: Record<string, string>; ports?: string[]; healthcheck?: { test: string[] }; image?: string }
    >;
  };
  const services = compose.services;
  const natsNodes = Object.keys(services).filter((n) => /^nats-\d$/.test(n));

  it("runs a three-node NATS cluster whose routes name every node, with the payload the images need", () => {
    expect(natsNodes).toEqual(["nats-1", "nats-2", "nats-3"]);
    const conf = read("ops/compose/nats.conf");
    for (const node of natsNodes) {
      expect(services[node].command).toEqual(["-c", "/etc/nats/nats.conf", "--name", node]);
      expect(conf).toContain(`nats-route://${node}:6222`);
    }
    expect(Number(/max_payload:\s*(\d+)/.exec(conf)![1])).toBeGreaterThanOrEqual(MAX_PAYLOAD_BYTES);
    expect(conf).toMatch(/jetstream\s*\{/);
  });

  it("runs each service and the gateway with options hadis serve has, on every node, probed where they listen", () => {
    const known = knownVariables();
    const kinds = new Set<string>();
    for (const [name, service] of Object.entries(services)) {
      if (!service.command || service.command[0] !== "serve") continue;
      const { kind, flags } = serveArgs(service.command, `compose ${name}`);
      kinds.add(kind);
      expect(service.image).toBe("hadis-ts:local");
      const urls = String(flags.get("--nats")).split(",");
      expect(urls.map((u) => new URL(u).hostname).sort()).toEqual(natsNodes);
      // Services replicate their streams on the three nodes; the gateway keeps none.
      expect(flags.get("--replicas"), name).toBe(kind === "gateway" ? undefined : "3");
      // The health check asks /readyz on the port the process serves its probes on.
      const check = service.healthcheck!.test.join(" ");
      expect(check).toContain(`http://127.0.0.1:${Number(flags.get("--metrics-port"))}/readyz`);
      // Only the gateway is published, on loopback.
      expect(service.ports ?? [], name).toEqual(
        kind === "gateway" ? [`127.0.0.1:${flags.get("--http-port")}:${flags.get("--http-port")}`] : [],
      );
      for (const variable of Object.keys(service.environment ?? {}))
        expect(known, `${name}: ${variable} is read by the code`).toContain(variable);
      const otlp = new URL(service.environment!.OTEL_EXPORTER_OTLP_ENDPOINT);
      expect(services[otlp.hostname], "the OTLP endpoint is a service of the file").toBeDefined();
    }
    expect([...kinds].sort()).toEqual([...KINDS].sort());
    // The collector receives OTLP/HTTP on the port the services send to.
    const collector = parse(read("ops/otel-collector.yaml")) as { receivers: { otlp: { protocols: { http: { endpoint: string } } } } };
    expect(collector.receivers.otlp.protocols.http.endpoint.split(":")[1]).toBe(
      new URL(services.router.environment!.OTEL_EXPORTER_OTLP_ENDPOINT).port,
    );
  });
});

describe("ops/k8s (Helm chart)", () => {
  const dir = "ops/k8s/hadis";
  const chart = parse(read(dir, "Chart.yaml")) as { dependencies: { name: string; repository: string; version: string }[] };
  const values = parse(read(dir, "values.yaml")) as {
    nats: {
      fullnameOverride: string;
      config: { monitor: { port: number }; cluster: { replicas: number }; merge: { max_payload: number } };
    };
  } & Record<string, unknown>;
  const parsed = readdirSync(join(ROOT, dir, "templates")).flatMap((file) =>
    parseAllDocuments(read(dir, "templates", file)).map((doc) => ({ file, doc })),
  );
  const manifests = parsed.map(({ file, doc }) => ({ file, doc: doc.toJS() as Record<string, any> })); // eslint-disable-line @typescript-eslint/no-explicit-any

  it("has templates that parse as YAML", () => {
    expect(parsed.length).toBeGreaterThan(3);
    expect(parsed.filter(({ doc }) => doc.errors.length > 0).map(({ file, doc }) => `${file}: ${doc.errors.join("; ")}`)).toEqual([]);
  });
  const byKind = (kind: string) => manifests.filter((m) => m.doc.kind === kind).map((m) => m.doc);

  it("takes NATS from its official Helm chart, clustered, with JetStream and the payload the images need", () => {
    expect(chart.dependencies).toEqual([
      expect.objectContaining({ name: "nats", repository: "https://nats-io.github.io/k8s/helm/charts/" }),
    ]);
    expect(values.nats.config.cluster.replicas).toBe(3);
    expect(values.nats.config.merge.max_payload).toBeGreaterThanOrEqual(MAX_PAYLOAD_BYTES);
  });

  it("every template value it fills in is in values.yaml", () => {
    for (const { file, doc } of manifests) {
      for (const m of JSON.stringify(doc).matchAll(/\{\{\s*\.Values\.([\w.]+)\s*\}\}/g)) {
        const found = m[1].split(".").reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], values);
        expect(found, `${file}: .Values.${m[1]}`).toBeDefined();
      }
    }
  });

  it("has one Deployment per service, each running hadis serve with its options, probed on /healthz and /readyz where it listens", () => {
    const known = knownVariables();
    const deployments = byKind("Deployment");
    const kinds = deployments.map((d) => {
      const [container] = d.spec.template.spec.containers;
      const { kind, flags } = serveArgs(container.args, d.metadata.name);
      expect(d.metadata.name).toBe(`hadis-${kind}`);
      expect(d.spec.selector.matchLabels).toEqual(d.spec.template.metadata.labels);
      expect(d.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
      // The NATS chart's client service, by the name values.yaml gives it.
      expect(new URL(String(flags.get("--nats"))).hostname).toBe(values.nats.fullnameOverride);
      expect(flags.get("--replicas")).toBe(kind === "gateway" ? undefined : String(values.nats.config.cluster.replicas));
      expect(flags.get("--metrics-host")).toBe("0.0.0.0");
      expect(flags.get("--http-host")).toBe(kind === "gateway" ? "0.0.0.0" : undefined);
      const ports = new Map<string, number>(container.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]));
      expect([...ports.values()]).toContain(Number(flags.get("--metrics-port")));
      for (const [probe, path] of [
        ["livenessProbe", "/healthz"],
        ["readinessProbe", "/readyz"],
      ] as const) {
        expect(container[probe].httpGet.path, `${kind} ${probe}`).toBe(path);
        expect(ports.get(container[probe].httpGet.port), `${kind} ${probe} port`).toBe(probePort(kind, flags));
      }
      for (const { name } of container.env) expect(known, `${kind}: ${name} is read by the code`).toContain(name);
      return kind;
    });
    expect(kinds.sort()).toEqual([...KINDS].sort());
    // The gateway's Service reaches its pods' HTTP port.
    const [service] = byKind("Service");
    const gateway = deployments.find((d) => d.metadata.name === "hadis-gateway")!;
    expect(service.spec.selector).toEqual(gateway.spec.template.metadata.labels);
    expect(service.spec.ports[0].targetPort).toBe("http");
  });

  it("scales workers with KEDA on each pool model's JetStream consumer of the work stream", () => {
    const [scaled] = byKind("ScaledObject");
    expect(scaled.apiVersion).toBe("keda.sh/v1alpha1");
    expect(scaled.spec.scaleTargetRef.name).toBe("hadis-worker");
    expect(byKind("Deployment").map((d) => d.metadata.name)).toContain(scaled.spec.scaleTargetRef.name);
    const s = subjects();
    const triggers = scaled.spec.triggers as { type: string; metadata: Record<string, string> }[];
    expect(new Set(triggers.map((t) => t.type))).toEqual(new Set(["nats-jetstream"]));
    expect(new Set(triggers.map((t) => t.metadata.stream))).toEqual(new Set([s.names.workStream]));
    expect(triggers.map((t) => t.metadata.consumer).sort()).toEqual(
      loadProfiles()
        .pool.models.map((m) => s.names.workConsumer(m))
        .sort(),
    );
    for (const t of triggers) {
      expect(t.metadata.natsServerMonitoringEndpoint).toMatch(
        new RegExp(`^${values.nats.fullnameOverride}-headless\\..*:${values.nats.config.monitor.port}$`),
      );
      expect(Number(t.metadata.lagThreshold)).toBeGreaterThan(0);
    }
  });
});
