/**
 * `hadis analyze`: prints the router's eight features and difficulty score of a prompt
 * (`--prompt`), or one JSON line per prompt of a file (`--file`, one prompt a line).
 */
import { FEATURE_NAMES } from "../../actors/profile/reference.ts";
import type { PromptAnalysis } from "../../actors/analyzer/analyzer.ts";
import { loadPromptAnalyzer, readPromptsFile } from "../files/analyzer-files.ts";
import { ConfigurationError } from "../../contracts/errors.ts";

/** Options of `hadis analyze`. */
export interface AnalyzeArgs {
  prompt?: string;
  /** File of prompts, one a line: prints one JSON object a line. */
  file?: string;
  /** Print `{features, score}` as JSON instead of a table. */
  json?: boolean;
  /** Router-weights file (default profiles/analyzer/router-weights.json). */
  weights?: string;
}

function toJson(prompt: string | undefined, a: PromptAnalysis): string {
  return JSON.stringify(prompt === undefined ? { features: a.features, score: a.score } : { prompt, features: a.features, score: a.score });
}

/** Runs the command; throws on bad arguments or unreadable files. */
export async function analyzeCommand(args: AnalyzeArgs): Promise<void> {
  if (args.prompt === undefined && args.file === undefined) throw new ConfigurationError("analyze: give --prompt TEXT or --file PATH");
  const analyzer = loadPromptAnalyzer(args.weights ? { weightsPath: args.weights } : {});
  if (args.file !== undefined) {
    for (const prompt of readPromptsFile(args.file)) console.log(toJson(prompt, analyzer.analyzePrompt(prompt)));
  }
  if (args.prompt !== undefined) {
    const a = analyzer.analyzePrompt(args.prompt);
    if (args.json) {
      console.log(toJson(undefined, a));
      return;
    }
    for (const name of FEATURE_NAMES) console.log(`${name.padEnd(18)} ${a.features[name]}`);
    console.log(`${"score".padEnd(18)} ${a.score.toFixed(4)}`);
    console.log(`(weights: ${analyzer.scoreModel.source})`);
  }
}
