/**
 * What the artifact's controller writes once a second, kept by a run as it goes: the queries it
 * knows to be in flight (its demand signal), the per-model load its planners read, and the rows
 * its scoring reads (`slo_timeouts_per_second.csv`, `query_num_per_second.csv`,
 * `cascade_config_per_second.csv`). Follows `hadis/src/controller/controller.py` (eventLoop,
 * checkWorkerHeartbeat, computeSLOTimeoutsPerSec, saveResultsToCSV).
 */
import { SignalTracker, type ArtifactSignals } from "./signals.ts";

/** One second's row. */
export interface LedgerRow {
  atMs: number;
  /** Answered within the SLO. */
  succeed: number;
  /** Answered after the SLO (or, in our design, answered with a deadline error). */
  timeout: number;
  /** Never answered (or refused). */
  drop: number;
  total: number;
  /** Queries each model's workers took in since the last row, in model order. */
  arrivals: number[];
  /** The table FID of the configuration in force (cascade policies; null for the others). */
  configFid: number | null;
}

/** How a query ended, as the ledger files it. */
export type LedgerOutcome = "succeed" | "timeout" | "drop";

interface Open {
  startMs: number;
  /** Tick at which the controller learns the outcome (counted in that tick's row). */
  knownAtMs?: number;
  outcome?: LedgerOutcome;
  /** Whether the query still counts as in flight at the tick it becomes known (a drop does; an answer does not). */
  lingers?: boolean;
}

/** The controller's per-second ledger. Ticks fall every 1,000 ms from `originMs`. */
export class ControllerLedger {
  private readonly open = new Map<number, Open>();
  private readonly tracker: SignalTracker;
  private readonly arrivalsSinceTick: Map<string, number>;
  private readonly arrivalsSinceRow: Map<string, number>;
  private writing = false;
  /** Rows written so far (from the first tick that saw demand). */
  readonly rows: LedgerRow[] = [];

  constructor(
    private readonly models: readonly string[],
    private readonly originMs: number,
  ) {
    this.tracker = new SignalTracker(models);
    this.arrivalsSinceTick = new Map(models.map((m) => [m, 0]));
    this.arrivalsSinceRow = new Map(models.map((m) => [m, 0]));
  }

  /** The first tick at or after `atMs` (strictly after when `strict`). */
  tickAt(atMs: number, strict = false): number {
    const k = (atMs - this.originMs) / 1000;
    const n = strict ? Math.floor(k) + 1 : Math.ceil(k);
    return this.originMs + n * 1000;
  }

  /** A query started (received by its first worker). */
  start(id: number, atMs: number): void {
    this.open.set(id, { startMs: atMs });
  }

  /**
   * A query ended at `atMs`: answered (`latencyMs` within or past `sloMs`), or given up as dropped.
   * `lingers`: the artifact's drops, which the controller counts in flight until it notices them
   * at the first tick after 2 × SLO.
   */
  end(id: number, atMs: number, outcome: LedgerOutcome, lingers = false): void {
    const q = this.open.get(id);
    if (!q || q.outcome) return;
    q.outcome = outcome;
    q.lingers = lingers;
    q.knownAtMs = this.tickAt(atMs, lingers);
  }

  /** A worker of `model` took a query in. */
  arrival(model: string): void {
    this.arrivalsSinceTick.set(model, (this.arrivalsSinceTick.get(model) ?? 0) + 1);
    this.arrivalsSinceRow.set(model, (this.arrivalsSinceRow.get(model) ?? 0) + 1);
  }

  /** One controller tick at `atMs`: folds in the sample and writes the row once demand was seen. */
  tick(atMs: number, queued: Record<string, number>, configFid: number | null): ArtifactSignals {
    let inFlight = 0;
    const row: LedgerRow = { atMs, succeed: 0, timeout: 0, drop: 0, total: 0, arrivals: [], configFid };
    for (const [id, q] of this.open) {
      const known = q.knownAtMs !== undefined && q.knownAtMs <= atMs;
      if (q.startMs <= atMs && (!known || (q.lingers && q.knownAtMs === atMs))) inFlight++;
      if (known) {
        row[q.outcome!]++;
        row.total++;
        this.open.delete(id);
      }
    }
    const signals = this.tracker.tick({
      inFlight,
      arrivals: Object.fromEntries(this.arrivalsSinceTick),
      queued,
    });
    for (const m of this.models) this.arrivalsSinceTick.set(m, 0);
    if (signals.demand > 0) this.writing = true;
    if (this.writing) {
      row.arrivals = this.models.map((m) => this.arrivalsSinceRow.get(m) ?? 0);
      for (const m of this.models) this.arrivalsSinceRow.set(m, 0);
      this.rows.push(row);
    }
    // Before the first demand no row is written; an outcome known then is lost from the rows, as
    // in the artifact (its running totals move on every tick).
    return signals;
  }

  /** The signals as of the last tick. */
  get signals(): ArtifactSignals {
    return this.tracker.signals;
  }

  /** Queries not yet known to have ended. */
  get unresolved(): number {
    return this.open.size;
  }
}
