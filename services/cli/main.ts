#!/usr/bin/env node
/**
 * The `hadis` command line: the operator's commands (start, serve, generate, status, profile,
 * analyze) here, the research ones in research/commands.ts. Each command's module
 * is imported when that command runs, so a command loads only what it uses (`--version`,
 * `generate` and `status` load no onnxruntime, no NLP model, no telemetry SDK).
 */
import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import { DEFAULT_NATS_URL, MAX_DEADLINE_MS, MAX_IDEMPOTENCY_KEY_CHARS, MAX_SEED } from "../../contracts/limits.ts";
import { packagePath } from "../files/package-root.ts";
import { DEFAULT_POLICY, POLICY_NAMES } from "../resource-manager/policy-names.ts";
import { SCORER_KINDS } from "../files/scorer-kinds.ts";
import { ARTIFACT_MECHANISMS } from "../../actors/artifact/mechanisms.ts";
import { atLeastOne, count, idPrefix, integerIn, mechanismList, nonNegative, port, positive, text } from "./options.ts";
import { jsonErrorsWhen } from "./tool-connection.ts";
import { researchCommands } from "./research/commands.ts";
import { environmentProblems } from "./environment.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

const { version } = JSON.parse(readFileSync(packagePath("package.json"), "utf8")) as { version: string };
// After a mistake, a hint rather than the whole help (40 lines that scrolled the error away).
const program = new Command("hadis")
  .description("HADIS: query-aware text-to-image diffusion serving over NATS")
  .version(version)
  .showHelpAfterError("(add --help for the options)");
// Settings from the environment, before any command starts anything.
program.hook("preAction", (_program, command) => {
  const problems = environmentProblems(process.env);
  if (problems.length === 0) return;
  for (const problem of problems) process.stderr.write(`hadis ${command.name()}: ${problem}\n`);
  process.exit(2);
});

const runOptions = (cmd: Command) =>
  cmd
    .option("--workers <n>", "profile-driven workers (GPUs) to run", atLeastOne, 16)
    .option("--routers <n>", "router instances", atLeastOne, 1)
    .option(
      "--time-scale <x>",
      "multiplies every profiled latency and the SLO (0.1 = the paper's 10x compression; default: the pool's, 1 = real time)",
      positive,
    )
    .addOption(new Option("--policy <name>", "planning policy of the resource manager").choices(POLICY_NAMES).default(DEFAULT_POLICY))
    .addOption(
      new Option(
        "--scorer <kind>",
        "router difficulty score: the learned per-pair model, the analyzer's reference weights, or the artifact's reference features (default: learned for hadis-plus, analyzer otherwise; docs/router.md)",
      ).choices(SCORER_KINDS),
    )
    .option("--analyzer-weights <file>", "analyzer score weights, e.g. learned ones (default <profiles>/analyzer/router-weights.json)")
    .option("--difficulty-model <file>", "with --scorer learned: the model file (default <profiles>/analyzer/difficulty-model.json)")
    .addOption(new Option("--backend <kind>", "worker and judge backend").choices(["profile", "onnx"]).default("profile"))
    .option("--zero-latency", "profile backends do not wait (overhead benchmarks)")
    .addOption(
      new Option(
        "--judge-on-worker <when>",
        "workers judge the light images they make and send the verdict with the image (no discriminator hop); auto: on for the profile backend, off for onnx (docs/design.md)",
      )
        .choices(["auto", "on", "off"])
        .env("HADIS_JUDGE_ON_WORKER")
        .default("auto"),
    )
    .option("--model-map <file>", "onnx backend: pool model name → export folder (default profiles/onnx/tiny-pool.json)")
    .option(
      "--models-dir <dir>",
      "onnx backend: folder of the exports (tiny models are generated there when missing or made by an older generator)",
      ".hadis/models",
    )
    .option("--profiles <dir>", "profiles folder (default: the repository's profiles/)")
    .option(
      "--static-config <json>",
      'static policy configuration, e.g. \'{"light":"sdxl-lightning","heavy":"sd35-large","routerThreshold":0.3,"discThreshold":0.1}\'',
    )
    .addOption(new Option("--storage <kind>", "JetStream storage of the work queue").choices(["file", "memory"]).default("file"))
    .addOption(
      new Option(
        "--fidelity <name>",
        "native: our serving design; artifact: the paper artifact's mechanisms, put in the plans by the resource manager (docs/benchmarks.md)",
      )
        .choices(["native", "artifact"])
        .default("native"),
    )
    .option(
      "--mechanisms <list>",
      `artifact mechanisms to turn on (or, as -name, off) on top of --fidelity (the simulator's partial sets; a live system runs native or the whole artifact): ${ARTIFACT_MECHANISMS.join(", ")}`,
      mechanismList,
    );

runOptions(
  program
    .command("start")
    .description("start a local nats-server and every service (the embedded default), until Ctrl-C")
    .option("--port <port>", "NATS client port on 127.0.0.1", port, 4222)
    .option("--data-dir <dir>", "nats-server data folder", ".hadis/nats")
    .option("--dashboard-port <port>", "dashboard and aggregated /metrics on this port", port, 8787)
    .option("--dashboard-host <host>", "address the dashboard listens on (it has no authentication: 0.0.0.0 exposes it)", "127.0.0.1")
    .option("--no-dashboard", "do not serve the dashboard")
    .option("--http-port <port>", "HTTP gateway (POST /v1/generate, /v1/jobs; GET /v1/models, /openapi.json) on this port", port, 8000)
    .option("--http-host <host>", "address the HTTP gateway listens on (it has no authentication: 0.0.0.0 exposes it)", "127.0.0.1")
    .option("--no-http", "do not serve the HTTP gateway"),
).action(async (opts) => {
  const { startCommand } = await import("./serve.ts");
  await startCommand(opts);
});

runOptions(
  program
    .command("serve")
    .description(
      "run one service against a NATS server: router | worker | discriminator | resource-manager | gateway (HTTP) | all (the four services)",
    )
    .argument("<service>")
    .option(
      "--nats <urls>",
      "NATS server URL (comma-separated for a cluster; default $NATS_URL, and one of them is required); credentials from HADIS_<ROLE>_NATS_USER/PASS, else HADIS_NATS_USER/PASS",
    )
    .option("--id-prefix <prefix>", "worker ids are <prefix>-NN (default: random)", idPrefix)
    .option("--metrics-port <port>", "serve Prometheus /metrics of this process on this port", port)
    .option("--metrics-host <host>", "address /metrics listens on (0.0.0.0 for a Prometheus on another host)", "127.0.0.1")
    .option("--replicas <n>", "JetStream replicas of the work stream and plan bucket (3 on a 3-node cluster)", count)
    .option(
      "--wait-for-nats <seconds>",
      "wait this long for a NATS server that is not up yet (0: fail at once); refused credentials or TLS fail at once",
      integerIn(0, 86_400),
      60,
    )
    .option("--http-port <port>", "gateway: HTTP port (default 8000)", port)
    .option("--http-host <host>", "gateway: address to listen on (default 127.0.0.1; 0.0.0.0 in a container)")
    .option("--http-max-body-bytes <n>", "gateway: largest request body read (default 65536)", atLeastOne)
    .option(
      "--http-max-concurrent <n>",
      "gateway: generate requests and job submissions in flight at once; past it 429 (default 256)",
      atLeastOne,
    ),
).action(async (service, opts, cmd: Command) => {
  const { serveCommand } = await import("./serve.ts");
  // The options typed on the command line (not defaults): `serve` warns of those its service does not read.
  await serveCommand(
    service,
    opts,
    cmd.options
      .filter((o) => cmd.getOptionValueSource(o.attributeName()) === "cli")
      .map((o) => ({ key: o.attributeName(), flag: o.long ?? o.flags })),
  );
});

program
  .command("generate")
  .description("send one prompt to hadis.generate and print how it was served")
  .argument("<prompt>")
  .option(
    "--nats <urls>",
    `NATS server URL (comma-separated for a cluster; default $NATS_URL, else ${DEFAULT_NATS_URL}); credentials from HADIS_CLIENT_NATS_USER/PASS or HADIS_NATS_USER/PASS`,
  )
  .option(
    "--deadline-ms <ms>",
    `deadline, 1 to ${MAX_DEADLINE_MS} (default: the SLO in force; without one the command waits up to ${MAX_DEADLINE_MS + 5_000} ms)`,
    integerIn(1, MAX_DEADLINE_MS),
  )
  .option("--seed <n>", `seed for the image, 0 to ${MAX_SEED} (default: random)`, integerIn(0, MAX_SEED))
  .option(
    "--idempotency-key <key>",
    `retries with the same key (1 to ${MAX_IDEMPOTENCY_KEY_CHARS} characters) are generated once`,
    text(MAX_IDEMPOTENCY_KEY_CHARS),
  )
  .option("--out <file>", "write the PNG here")
  .option("--json", "print the reply as one JSON object (image as its byte length)")
  .option(
    "--preview",
    "when the discriminator rejects the light image, print (and save next to --out, as <name>.preview.png) that image at once, then the heavy model's final one; with --json, one object per message",
  )
  // With --json, a mistake on the command line is one {"error": …} object on stdout too, as every other failure.
  .configureOutput(jsonErrorsWhen(process.argv.includes("--json")))
  .action(async (prompt, opts) => {
    const { generateCommand } = await import("./generate.ts");
    await generateCommand(prompt, opts);
  });

program
  .command("status")
  .description("print the plan in force and every worker's model and state, from a running system")
  .option(
    "--nats <urls>",
    `NATS server URL (comma-separated for a cluster; default $NATS_URL, else ${DEFAULT_NATS_URL}); credentials from HADIS_OBSERVER_NATS_USER/PASS or HADIS_NATS_USER/PASS`,
  )
  .option("--listen-ms <ms>", "how long to listen to worker heartbeats (they beat every second), up to 60000", integerIn(1, 60_000), 1_500)
  .option("--json", "print one JSON object: manager, plan, demandQps, workers (their heartbeats)")
  .configureOutput(jsonErrorsWhen(process.argv.includes("--json")))
  .action(async (opts) => {
    const { statusCommand } = await import("./status.ts");
    await statusCommand(opts);
  });

program
  .command("profile")
  .description("measure an ONNX model export: latency per batch size, load/unload time and memory; writes a profile file")
  .argument("<model-dir>")
  .option("--batches <list>", "batch sizes", (v: string) => v.split(",").map((x) => atLeastOne(x)), [1, 2, 4, 8])
  .option("--out <file>", "write the profile JSON here (default: stdout)")
  .option("--name <name>", "model name in the profile")
  .option("--runs <n>", "runs per batch size (median)", atLeastOne, 3)
  .option("--steps <n>", "denoising steps", atLeastOne)
  .option("--guidance-scale <x>", "classifier-free guidance scale (at most 1: none)", nonNegative)
  .action(async (dir, opts) => {
    const { profileCommand } = await import("./profile.ts");
    await profileCommand(dir, opts);
  });

program
  .command("analyze")
  .description("print a prompt's eight router features and its difficulty score")
  .argument("[prompt]")
  .option("--file <prompts.txt>", "analyze every line of a file (one JSON line each)")
  .option("--json", "print one JSON object {features, score}")
  .option("--weights <file>", "score weights file (default profiles/analyzer/router-weights.json)")
  .action(async (prompt, opts) => {
    if (!prompt && !opts.file) throw new ConfigurationError("give a prompt or --file");
    const { analyzeCommand } = await import("./analyze.ts");
    await analyzeCommand({ prompt, ...opts });
  });

// The research commands: the anchor experiment, calibration, the router's training, the lookup table, traces.
researchCommands(program);

program.parseAsync(process.argv).catch((err) => {
  process.stderr.write(`hadis: ${(err as Error).message}\n`);
  process.exit(1);
});
