/** The `hadis` command line: start, serve, generate, and the offline tools. */
import { Command, Option } from "commander";
import { DEFAULT_NATS_URL } from "../lib/nats.ts";
import { generateCommand } from "./generate.ts";
import { count, port, positive } from "./options.ts";
import { serveCommand, startCommand } from "./serve.ts";

const program = new Command("hadis").description("HADIS: query-aware text-to-image diffusion serving over NATS").showHelpAfterError();

const runOptions = (cmd: Command) =>
  cmd
    .option("--workers <n>", "profile-driven workers (GPUs) to run", count, 16)
    .option("--routers <n>", "router instances", count, 1)
    .option("--time-scale <x>", "multiplies every profiled latency (0.1 = the paper's 10x compression)", positive)
    .option("--policy <name>", "planning policy of the resource manager", "static")
    .addOption(new Option("--backend <kind>", "worker and judge backend").choices(["profile", "onnx"]).default("profile"))
    .option("--zero-latency", "profile backends do not wait (overhead benchmarks)")
    .option("--model-map <file>", "onnx backend: pool model name → export folder (default profiles/onnx/tiny-pool.json)")
    .option("--models-dir <dir>", "onnx backend: folder of the exports (tiny models are generated there when missing)", ".hadis/models")
    .option("--profiles <dir>", "profiles folder (default: the repository's profiles/)")
    .option("--static-config <json>", 'static policy configuration, e.g. \'{"light":"sdxl-lightning","heavy":"sd35-large","routerThreshold":0.3,"discThreshold":0.1}\'')
    .addOption(new Option("--storage <kind>", "JetStream storage of the work queue").choices(["file", "memory"]).default("file"));

runOptions(
  program
    .command("start")
    .description("start a local nats-server and every service (the embedded default), until Ctrl-C")
    .option("--port <port>", "NATS client port on 127.0.0.1", port, 4222)
    .option("--data-dir <dir>", "nats-server data folder", ".hadis/nats"),
).action((opts) => startCommand(opts));

runOptions(
  program
    .command("serve")
    .description("run one service against a NATS server: router | worker | discriminator | resource-manager | all")
    .argument("<service>")
    .option("--nats <url>", "NATS server URL", DEFAULT_NATS_URL)
    .option("--id-prefix <prefix>", "worker ids are <prefix>-NN (default: random)"),
).action((service, opts) => serveCommand(service, opts));

program
  .command("generate")
  .description("send one prompt to hadis.generate and print how it was served")
  .argument("<prompt>")
  .option("--nats <url>", "NATS server URL", DEFAULT_NATS_URL)
  .option("--deadline-ms <ms>", "deadline (default: the SLO in force)", count)
  .option("--seed <n>", "seed for the image", count)
  .option("--idempotency-key <key>", "retries with the same key are generated once")
  .option("--out <file>", "write the PNG here")
  .option("--json", "print the reply as one JSON object (image as its byte length)")
  .action((prompt, opts) => generateCommand(prompt, opts));

program
  .command("profile")
  .description("measure an ONNX model export: latency per batch size, load/unload time and memory; writes a profile file")
  .argument("<model-dir>")
  .option("--batches <list>", "batch sizes", (v: string) => v.split(",").map((x) => count(x)), [1, 2, 4, 8])
  .option("--out <file>", "write the profile JSON here (default: stdout)")
  .option("--name <name>", "model name in the profile")
  .option("--runs <n>", "runs per batch size (median)", count, 3)
  .option("--steps <n>", "denoising steps", count)
  .option("--guidance-scale <x>", "classifier-free guidance scale", Number)
  .action(async (dir, opts) => {
    const { profileCommand } = await import("./profile.ts");
    await profileCommand(dir, opts);
  });

program.parseAsync(process.argv).catch((err) => {
  process.stderr.write(`hadis: ${(err as Error).message}\n`);
  process.exit(1);
});
