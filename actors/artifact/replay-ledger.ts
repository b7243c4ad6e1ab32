/**
 * The artifact controller's rows rebuilt from a live replay's records (what the caller saw), for
 * the artifact's scoring of a live run: each request starts at its arrival and is known at the
 * tick after its answer (or, unanswered, at the first tick past 2 × SLO); each model's workers
 * took it in when it entered that model's stage.
 */
import type { RequestRecord } from "../sim/scoring.ts";
import { ControllerLedger, type LedgerRow } from "./ledger.ts";

/** A plan in force from `atMs` with the FID its configuration is scored at (null: not a cascade policy). */
export interface ConfigMark {
  atMs: number;
  configFid: number | null;
}

/** What `rowsFromRecords` needs. */
export interface ReplayRowsInput {
  records: readonly (RequestRecord & { heavyFromMs?: number })[];
  /** Model names in the artifact's order (the row columns). */
  models: readonly string[];
  /** The light model of the plan in force at a time (every query enters there under random dispatch), or null. */
  lightAt(atMs: number): string | null;
  marks: readonly ConfigMark[];
  sloMs: number;
  /** The controller stops this long after the last arrival (rows end there). */
  stopAfterMs: number;
}

/** The per-second rows a live replay's controller would have written. */
export function rowsFromRecords(input: ReplayRowsInput): LedgerRow[] {
  const { records, sloMs } = input;
  const first = Math.min(...records.map((r) => r.arrivalMs));
  const last = Math.max(...records.map((r) => r.arrivalMs));
  const origin = Math.floor(first / 1000) * 1000 - 1000;
  const ledger = new ControllerLedger(input.models, origin);
  type Event = { atMs: number; apply: () => void };
  const events: Event[] = [];
  records.forEach((r, id) => {
    events.push({ atMs: r.arrivalMs, apply: () => ledger.start(id, r.arrivalMs) });
    const light = r.models?.light ?? (r.route === "heavy" ? input.lightAt(r.arrivalMs) : null);
    if (light) events.push({ atMs: r.arrivalMs, apply: () => ledger.arrival(light) });
    const heavy = r.models?.heavy;
    if (heavy) events.push({ atMs: r.arrivalMs + (r.heavyFromMs ?? 0), apply: () => ledger.arrival(heavy) });
    if (!r.models && r.servedModel) events.push({ atMs: r.arrivalMs, apply: () => ledger.arrival(r.servedModel!) });
    if (r.outcome === "served" && r.latencyMs !== null) {
      const at = r.arrivalMs + r.latencyMs;
      events.push({ atMs: at, apply: () => ledger.end(id, at, r.latencyMs! > sloMs ? "timeout" : "succeed") });
    } else if (r.outcome === "timedOut") {
      events.push({ atMs: r.arrivalMs + sloMs, apply: () => ledger.end(id, r.arrivalMs + sloMs, "timeout") });
    } else {
      const at = r.arrivalMs + (r.latencyMs ?? 2 * sloMs);
      events.push({ atMs: at, apply: () => ledger.end(id, at, "drop", r.latencyMs === null) });
    }
  });
  events.sort((a, b) => a.atMs - b.atMs);
  const marks = [...input.marks].sort((a, b) => a.atMs - b.atMs);
  const configAt = (t: number) => {
    let fid: number | null = null;
    for (const m of marks) if (m.atMs <= t) fid = m.configFid;
    return fid;
  };
  let next = 0;
  for (let t = origin; t <= last + input.stopAfterMs; t += 1000) {
    while (next < events.length && events[next].atMs <= t) events[next++].apply();
    ledger.tick(t, {}, null);
    const row = ledger.rows[ledger.rows.length - 1];
    if (row && row.atMs === t) row.configFid = configAt(t);
  }
  return ledger.rows;
}
