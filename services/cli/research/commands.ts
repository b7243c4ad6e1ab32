/**
 * The research commands of `hadis`: the anchor experiment on the simulator (`sim`) and live
 * (`bench e1`), router calibration, the Pareto lookup table and arrival traces. Apart from the
 * operator's commands (main.ts); each module is imported when its command runs.
 */
import { Command, Option } from "commander";
import { POLICY_NAMES as PLANNER_POLICIES } from "../../../actors/planner/policy-names.ts";
import { ARTIFACT_MECHANISMS } from "../../../actors/artifact/mechanisms.ts";
import { packagePath } from "../../files/package-root.ts";
import { SCORER_KINDS } from "../../files/scorer-kinds.ts";
import { atLeastOne, count, mechanismList, positive } from "../options.ts";
import { ConfigurationError } from "../../../contracts/errors.ts";

/** The anchor trace and prompts (`e1-report.ts` names the same files). */
const DEFAULT_TRACE = packagePath("profiles/reference/traces/azure_1to64qps.txt");
const DEFAULT_PROMPTS = packagePath("profiles/reference/prompts/imagenet1k_captions_5k.txt");

/** Adds the research commands to `program`. */
export function researchCommands(program: Command): void {
  program
    .command("calibrate")
    .description("learn router weights from measured quality; compare ROC AUC of reference, learned and random routing on held-out prompts")
    .option("--pair <light:heavy>", "reference model ids of the pair", "2:3")
    .option("--out <file>", "where to write the learned weights (default profiles/analyzer/router-weights-learned.json)")
    .option("--seed <n>", "fold seed", count)
    .option("--folds <k>", "cross-validation folds", count, 5)
    .option("--repeats <n>", "repeats of the k-fold cross-validation (fold seeds seed, seed+1, …)", count, 4)
    .addOption(
      new Option(
        "--label <kind>",
        "hard = the light model's image log-odds fall below the heavy model's by more than the median, in standard errors (logit-gap); the raw P(real) gain is above the median (gap); or the light model's score is in the lowest 20% (light-fails)",
      )
        .choices(["logit-gap", "gap", "light-fails"])
        .default("logit-gap"),
    )
    .action(async (opts) => {
      const { calibrateCommand } = await import("./calibrate.ts");
      await calibrateCommand(opts);
    });

  program
    .command("train-router")
    .description(
      "learn the per-pair difficulty model from the discriminator scores; held-out AUC and served quality against the reference weights (docs/router.md)",
    )
    .option("--pairs <list>", "pairs as light:heavy reference ids, comma-separated (default: every pair)")
    .option("--seeds <n>", "held-out splits by prompt (seeds 1..n)", atLeastOne, 5)
    .option("--out <file>", "where to write the model (default profiles/analyzer/difficulty-model.json)")
    .option("--holdout-seed <n>", "fit on that split's training prompts only and write its held-out prompts beside the model", count)
    .option("--holdout-prompts <file>", "with --holdout-seed: where to write the held-out prompts")
    .option("--use-all", "mark every pair in use (simulator experiments), not only those where served quality rose")
    .action(async (opts) => {
      const { trainRouterCommand } = await import("./train-router.ts");
      await trainRouterCommand(opts);
    });

  program
    .command("pareto")
    .description("build the Pareto lookup table from the full configuration grid and compare it with the reference table")
    .option("--out <file>", "write the front as CSV")
    .action(async (opts) => {
      const { paretoCommand } = await import("./pareto.ts");
      await paretoCommand(opts);
    });

  const e1Options = (cmd: Command, live: boolean) =>
    cmd
      .addOption(
        new Option("--trace <file>", "arrival trace, lines arrival_ms,prompt_idx").default(
          DEFAULT_TRACE,
          "profiles/reference/traces/azure_1to64qps.txt",
        ),
      )
      .addOption(
        new Option("--prompts <file>", "prompts, one a line (line i = prompt index i)").default(
          DEFAULT_PROMPTS,
          "profiles/reference/prompts/imagenet1k_captions_5k.txt",
        ),
      )
      .addOption(
        new Option(
          "--policy <name|all>",
          `planning policy, or all ten${live ? "" : "; clairvoyant: the simulator's bound (hadis-plus told the demand to come)"}`,
        )
          .choices(["all", ...PLANNER_POLICIES, ...(live ? [] : ["clairvoyant"])])
          .default("all"),
      )
      .option(
        "--slo-ms <ms>",
        `latency objective per request, ms (default: the pool's SLO at --time-scale, 6000 at 0.1${live ? "; against a running system, its plan's" : ""})`,
        positive,
      )
      .option("--workers <n>", "workers (GPUs)", atLeastOne, 16)
      .option("--time-scale <x>", "multiplies every profiled latency", positive, 0.1)
      .addOption(
        new Option("--fidelity <name>", "native: our serving design; artifact: the paper artifact's mechanisms (docs/benchmarks.md)")
          .choices(["native", "artifact"])
          .default("native"),
      )
      .option(
        "--mechanisms <list>",
        `artifact mechanisms to turn on (or, as -name, off) on top of --fidelity: ${ARTIFACT_MECHANISMS.join(", ")}`,
        mechanismList,
      )
      .option("--json <file>", "write the report as JSON")
      .option("--plots", "write PNG plots under bench/results/ (default with --policy all)")
      .addOption(
        new Option(
          "--scorer <kind>",
          "router difficulty score (default: learned for hadis-plus, analyzer otherwise; docs/router.md; under the artifact's hadis mechanism HADIS uses the reference features)",
        ).choices(SCORER_KINDS),
      )
      .option("--difficulty-model <file>", "with --scorer learned: the model file (default profiles/analyzer/difficulty-model.json)");

  e1Options(
    program.command("sim").description("the anchor experiment on the discrete-event simulator (no NATS): policies over a trace"),
    false,
  )
    .option("--seed <n>", "seed of the simulation", count, 1)
    .option(
      "--keep-finished",
      "what-if: queued work of answered or expired requests stays in the queues (the behaviour before routers removed it)",
    )
    .action(async (opts) => {
      const { simCommand } = await import("./sim.ts");
      await simCommand(opts);
    });

  e1Options(
    program
      .command("bench")
      .description("live benchmarks against NATS: `bench e1` replays a trace against a running system or embedded fresh ones")
      .argument("<name>", "benchmark name (e1)")
      .option(
        "--nats <urls>",
        "NATS server of a running system, comma-separated for a cluster (default: --embedded); its policy is read from its plans",
      )
      .option("--embedded", "start a nats-server and a fresh system per policy in this process"),
    true,
  ).action(async (name, opts) => {
    if (name !== "e1") throw new ConfigurationError(`unknown benchmark "${name}" (known: e1)`);
    const { benchE1Command } = await import("./bench-e1.ts");
    await benchE1Command(opts);
  });

  program
    .command("trace")
    .description("generate an arrival trace from an hourly invocation shape (Poisson arrivals per second)")
    .requiredOption("--from-hourly <csv>", "hourly shape, columns ,hour,invocations (required)")
    .option("--min-qps <x>", "rate at the shape's minimum", positive, 1)
    .option("--max-qps <x>", "rate at the shape's maximum", positive, 64)
    .option("--seconds <n>", "trace length, s", atLeastOne, 300)
    .option("--seed <n>", "seed", count, 1)
    .option("--prompt-count <n>", "prompt indices are uniform below this", atLeastOne, 5000)
    .requiredOption("--out <file>", "write the trace here (required)")
    .action(async (opts) => {
      const { traceCommand } = await import("./trace.ts");
      traceCommand(opts);
    });
}
