/**
 * Writing the plan to KV as compare-and-set: a manager writes epoch N+1 only over the entry it
 * read, so two managers on one bucket (a second replica, an old one not yet gone) never both
 * write the same epoch, which services would each take from whichever reached them first. The
 * one that loses takes the other's plan and plans from it at its next tick.
 */
import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { decode, encode, validate } from "../../contracts/envelope.ts";
import { HadisError } from "../../contracts/errors.ts";
import { PlanSchema, type Plan } from "../../contracts/messages.ts";
import type { KV } from "./connection.ts";

/** What a write did: written, or lost to a plan another manager wrote (its bytes and epoch). */
export type PlanWrite = { written: true } | { written: false; theirs: Uint8Array; epoch: number };

const lostRace = (err: unknown) =>
  err instanceof JetStreamApiError && (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);

/** The epoch of a stored plan, -1 when it is not one (it is overwritten then). */
function epochOf(value: Uint8Array): number {
  try {
    return decode(PlanSchema, value, "plan").epoch;
  } catch {
    return -1;
  }
}

/** Reads `key`: the stored plan's bytes, epoch and revision (revision 0: no entry ever). */
async function read(kv: KV, key: string): Promise<{ value: Uint8Array; epoch: number; revision: number }> {
  const entry = await kv.get(key);
  if (!entry) return { value: new Uint8Array(), epoch: -1, revision: 0 };
  const live = entry.operation === "PUT" && entry.value.length > 0;
  return { value: live ? entry.value : new Uint8Array(), epoch: live ? epochOf(entry.value) : -1, revision: entry.revision };
}

/** Writes `plan` (checked against its schema first) under `key` unless the stored plan's epoch is already at least its own, or another write lands first. */
export async function writePlan(kv: KV, key: string, plan: Plan): Promise<PlanWrite> {
  // Every service rejects a plan its schema refuses (a NaN from a bad input, say) and keeps the
  // old one: written, it would stop every later epoch too, and a restarted manager could not read it.
  try {
    validate(PlanSchema, plan, "plan");
  } catch (err) {
    throw new HadisError("internal", `not writing epoch ${plan.epoch}: ${(err as Error).message}`, {}, { cause: err });
  }
  const stored = await read(kv, key);
  if (stored.epoch >= plan.epoch) return { written: false, theirs: stored.value, epoch: stored.epoch };
  try {
    // (`update` takes revisions from 1: a key never written is created, failing if one lands first.)
    if (stored.revision === 0) await kv.create(key, encode(plan));
    else await kv.update(key, encode(plan), stored.revision);
    return { written: true };
  } catch (err) {
    if (!lostRace(err)) throw err;
    const now = await read(kv, key);
    return { written: false, theirs: now.value, epoch: now.epoch };
  }
}
