/**
 * Work this router waits for: one outstanding generation per request and stage (light, then maybe
 * heavy; both at once while hadis-plus races a late heavy image with the light model), keyed by
 * request id and stage. When a new plan leaves a waiting item's model without workers, the item
 * is moved to the model that now plays its stage, so a plan change strands nothing.
 */
import { fromWireError } from "../../contracts/errors.ts";
import { decode } from "../../contracts/envelope.ts";
import { PROTOCOL_VERSION, WorkResultSchema, type Plan, type WorkItem, type WorkResult } from "../../contracts/messages.ts";
import type { GenerateOutcome } from "../../actors/request/types.ts";
import { moveTarget } from "../../actors/routing/move-target.ts";

export { moveTarget };
import type { Span } from "../telemetry/tracing.ts";

/** One generation this router waits for. */
export interface PendingItem {
  item: WorkItem;
  stage: "light" | "heavy";
  /** Stream sequence of the queued item (0 until the publish is acknowledged). */
  seq: number;
  /** The queued item is this router's own publish (not a keyed duplicate of another router's, which that router removes). */
  own?: boolean;
  resolve(result: GenerateOutcome): void;
  reject(err: unknown): void;
  /** The stage span, when the request is traced: a moved item carries its trace context. */
  span?: Span;
  /** Settles with the stage (a keyed entry's: its bucket watch and ride timers stop then). */
  settled?: Promise<unknown>;
  /** A keyed entry's result is watched for in the results bucket (it rides, or rode, on another attempt's item). */
  watched?: boolean;
  /** The worker whose own queue it goes to (the artifact's random dispatch); absent: its model's queue. */
  lane?: { worker: string };
}

/** How many delivered results a router remembers to tell a second copy from an orphan (a few seconds' worth at 1,000 a second). */
const RECENT_RESULTS = 4_096;

const keyOf = (requestId: string, stage: PendingItem["stage"]) => `${requestId}/${stage}`;

/** The waiting generations of one router. */
export class PendingWork {
  private readonly items = new Map<string, PendingItem>();
  /** Results that matched nothing (late, after expiry, or the other copy of a moved item). */
  orphaned = 0;
  /** Second copies of results already delivered (a worker sends again what it sent just before its connection dropped). */
  duplicates = 0;
  malformed = 0;
  /** The last `RECENT_RESULTS` results delivered (request id and stage), oldest first: a second copy is told from an orphan by them. */
  private readonly recent = new Set<string>();

  /**
   * `onSuperseded(seq)`: a moved item's request was answered by its old model (the batch that
   * held it when the plan changed finished after all), so its copy queued at `seq` for the new
   * model is not needed: removing it spares a GPU a second generation.
   */
  constructor(private readonly onSuperseded?: (seq: number) => void) {}

  /** Registers a generation; the returned function forgets it. */
  wait(entry: PendingItem): () => void {
    this.items.set(keyOf(entry.item.requestId, entry.stage), entry);
    return () => this.drop(entry);
  }

  /** Forgets `entry` if it is still the one its request waits on (a move that failed: the request ends with its error). */
  drop(entry: PendingItem): void {
    if (this.isWaiting(entry)) this.items.delete(keyOf(entry.item.requestId, entry.stage));
  }

  /** Whether `entry` is still the one its request's stage waits on (not answered, dropped or replaced). */
  isWaiting(entry: PendingItem): boolean {
    return this.items.get(keyOf(entry.item.requestId, entry.stage)) === entry;
  }

  /** The waiting entry of a request's stage. */
  get(requestId: string, stage: PendingItem["stage"]): PendingItem | undefined {
    return this.items.get(keyOf(requestId, stage));
  }

  /** Delivers an encoded work result; the first result of a request wins, whatever model made it. */
  deliver(data: Uint8Array): void {
    let result: WorkResult;
    try {
      result = decode(WorkResultSchema, data, "work result");
    } catch {
      this.malformed++;
      return;
    }
    const key = keyOf(result.requestId, result.stage);
    const entry = this.items.get(key);
    // A late copy of a stage already answered (left behind by a move) matches nothing; nor may
    // the old copy's failure end a request whose moved copy may still succeed.
    const delivered = `${result.requestId}/${result.stage}/${result.model}`;
    if (!entry || (!result.ok && result.model !== entry.item.model)) {
      if (this.recent.has(delivered)) this.duplicates++;
      else this.orphaned++;
      return;
    }
    this.items.delete(key);
    this.remember(delivered);
    // (Only its own copy: one it rides on is another attempt's, which that attempt's router removes.)
    if (result.model !== entry.item.model && entry.seq && entry.own !== false) this.onSuperseded?.(entry.seq);
    if (result.ok) {
      entry.resolve({
        image: result.image,
        width: result.width,
        height: result.height,
        model: result.model,
        workerId: result.workerId,
        batchSize: result.batchSize,
        queueWaitMs: result.queueWaitMs,
        execMs: result.execMs,
        ...(result.applied ? { applied: result.applied } : {}),
        ...(result.verdict ? { verdict: result.verdict } : {}),
      });
    } else {
      entry.reject(fromWireError({ v: PROTOCOL_VERSION, error: result.error as never }));
    }
  }

  private remember(key: string): void {
    this.recent.add(key);
    if (this.recent.size > RECENT_RESULTS) this.recent.delete(this.recent.values().next().value!);
  }

  /** Entries queued for a model the plan gives no workers, with the model that now plays their stage. */
  stranded(plan: Plan): { entry: PendingItem; to: string }[] {
    const out: { entry: PendingItem; to: string }[] = [];
    for (const entry of this.items.values()) {
      const to = entry.seq === 0 ? null : moveTarget(plan, entry.stage, entry.item.model);
      if (to) out.push({ entry, to });
    }
    return out;
  }

  get size(): number {
    return this.items.size;
  }

  /** Every waiting entry, now. */
  waiting(): PendingItem[] {
    return [...this.items.values()];
  }

  /** How many generations of each model this router waits on (queued, or in a batch running now). */
  waitingByModel(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const entry of this.items.values()) counts.set(entry.item.model, (counts.get(entry.item.model) ?? 0) + 1);
    return counts;
  }
}
