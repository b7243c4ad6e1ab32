/**
 * Worker → model assignment that moves the fewest workers to reach the target counts.
 */
import type { WorkerInventoryItem } from "./snapshot.ts";

/** Tie-breaking inputs of `assignWorkers`. */
export interface AssignOptions {
  /** Last swap time per worker, ms: among surplus workers of a model, the longest-settled move first. */
  lastSwapAtMs?: Record<string, number>;
}

/** The model a worker holds for planning: its current assignment if any (a swap in flight counts as done), else the one it reports. */
export function holdingOf(w: WorkerInventoryItem, assignment: Readonly<Record<string, string>> | undefined): string | null {
  return assignment?.[w.id] ?? w.model ?? null;
}

/**
 * Assigns workers to models to meet `targetCounts`, moving the fewest. A worker's model is
 * its current assignment if any (a swap in flight counts as done), else the model it holds.
 * Workers that keep their model stay; the rest are filled from unassigned workers first, then
 * from surplus workers (longest since their last swap, then by id). Workers beyond the total
 * target are left out (idle). Deterministic.
 */
export function assignWorkers(
  workers: WorkerInventoryItem[],
  currentAssignment: Record<string, string>,
  targetCounts: Record<string, number>,
  options: AssignOptions = {},
): Record<string, string> {
  const lastSwap = options.lastSwapAtMs ?? {};
  const remaining: Record<string, number> = {};
  for (const [m, c] of Object.entries(targetCounts)) remaining[m] = Math.max(0, Math.floor(c));
  const holding = (w: WorkerInventoryItem) => holdingOf(w, currentAssignment);
  // Workers that were swapped most recently are kept first, so they can dwell.
  const byKeepPriority = [...workers].sort(
    (a, b) => (lastSwap[b.id] ?? -Infinity) - (lastSwap[a.id] ?? -Infinity) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
  );
  const out: Record<string, string> = {};
  const movers: WorkerInventoryItem[] = [];
  for (const w of byKeepPriority) {
    const m = holding(w);
    if (m !== null && (remaining[m] ?? 0) > 0) {
      out[w.id] = m;
      remaining[m] -= 1;
    } else movers.push(w);
  }
  movers.sort((a, b) => {
    const ua = holding(a) === null ? 0 : 1;
    const ub = holding(b) === null ? 0 : 1;
    return ua - ub || (lastSwap[a.id] ?? -Infinity) - (lastSwap[b.id] ?? -Infinity) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  });
  const models = Object.keys(remaining).sort();
  for (const w of movers) {
    const target = models.filter((m) => remaining[m] > 0).sort((a, b) => remaining[b] - remaining[a] || (a < b ? -1 : 1))[0];
    if (target === undefined) break;
    out[w.id] = target;
    remaining[target] -= 1;
  }
  return out;
}

/** Workers that held a model before and hold a different one (or none) after: true swaps. */
export function countSwaps(before: Record<string, string>, after: Record<string, string>): number {
  let swaps = 0;
  for (const [id, model] of Object.entries(before)) if (after[id] !== model) swaps += 1;
  return swaps;
}

/** Ids of the workers `countSwaps` counts. */
export function swappedWorkers(before: Record<string, string>, after: Record<string, string>): string[] {
  return Object.keys(before)
    .filter((id) => after[id] !== before[id])
    .sort();
}

/** Counts workers per model in an assignment. */
export function countByModel(assignment: Record<string, string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of Object.values(assignment)) out[m] = (out[m] ?? 0) + 1;
  return out;
}
