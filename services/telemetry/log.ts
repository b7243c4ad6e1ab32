/** Structured one-line JSON logs on stderr; level from `HADIS_LOG` (debug|info|warn|error, default info). */

/** A logger bound to a service name. */
export interface Logger {
  debug(event: string, fields?: Record<string, unknown>): void;
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

/** Log levels, least severe first (`HADIS_LOG` names one). */
export const LOG_LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
const LEVELS = LOG_LEVELS;
type Level = keyof typeof LEVELS;

/** Creates a logger for one service. */
export function createLogger(service: string, level: Level = (process.env.HADIS_LOG as Level) ?? "info"): Logger {
  const min = LEVELS[level] ?? LEVELS.info;
  const emit = (lvl: Level, event: string, fields?: Record<string, unknown>) => {
    if (LEVELS[lvl] < min) return;
    process.stderr.write(JSON.stringify({ t: new Date().toISOString(), level: lvl, service, event, ...fields }) + "\n");
  };
  return {
    debug: (e, f) => emit("debug", e, f),
    info: (e, f) => emit("info", e, f),
    warn: (e, f) => emit("warn", e, f),
    error: (e, f) => emit("error", e, f),
  };
}

/**
 * A log line for an event that can come in floods (bad messages from a broken peer): the first
 * at once, then at most one per `everyMs`, each saying how many it left out since the last.
 */
export function throttled(
  log: Logger,
  level: Exclude<Level, "silent">,
  event: string,
  everyMs = 60_000,
  now: () => number = Date.now,
): (fields: Record<string, unknown>) => void {
  let lastMs = Number.NEGATIVE_INFINITY;
  let left = 0;
  return (fields) => {
    const t = now();
    if (t - lastMs < everyMs) {
      left++;
      return;
    }
    log[level](event, left > 0 ? { ...fields, leftOut: left } : fields);
    lastMs = t;
    left = 0;
  };
}
