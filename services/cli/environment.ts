/**
 * Settings the commands read from the environment, checked before anything starts: a misspelt
 * value ends the command (exit 2) naming the variable, rather than being quietly read as the
 * default.
 */
import { LOG_LEVELS } from "../telemetry/log.ts";

/** What is wrong with the environment's settings, one line each (none: nothing). */
export function environmentProblems(env: NodeJS.ProcessEnv): string[] {
  const problems: string[] = [];
  const level = env.HADIS_LOG;
  if (level !== undefined && !Object.hasOwn(LOG_LEVELS, level))
    problems.push(`HADIS_LOG=${level} is not a log level: one of ${Object.keys(LOG_LEVELS).join(", ")}`);
  return problems;
}
