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

/** What a write did: written, or lost to a plan another manager wrote (its plan, null when it does not read, and its epoch). */
export type PlanWrite = { written: true } | { written: false; theirs: Plan | null; epoch: number };

const lostRace = (err: unknown) =>
  err instanceof JetStreamApiError &&
  (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);

/** The stored plan, null when the entry is not one (it is overwritten then). */
function planIn(value: Uint8Array): Plan | null {
  try {
    return decode(PlanSchema, value, "plan");
  } catch {
    return null;
  }
}

/** Reads `key`: the stored plan (null: none, or not one), its epoch (-1 then) and the entry's revision (0: no entry ever). */
async function read(kv: KV, key: string): Promise<{ plan: Plan | null; epoch: number; revision: number }> {
  const entry = await kv.get(key);
  if (!entry) return { plan: null, epoch: -1, revision: 0 };
  const plan = entry.operation === "PUT" && entry.value.length > 0 ? planIn(entry.value) : null;
  return { plan, epoch: plan?.epoch ?? -1, revision: entry.revision };
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
  if (stored.epoch >= plan.epoch) return { written: false, theirs: stored.plan, epoch: stored.epoch };
  try {
    // (`update` takes revisions from 1: a key never written is created, failing if one lands first.)
    if (stored.revision === 0) await kv.create(key, encode(plan));
    else await kv.update(key, encode(plan), stored.revision);
    return { written: true };
  } catch (err) {
    if (!lostRace(err)) throw err;
    const now = await read(kv, key);
    return { written: false, theirs: now.plan, epoch: now.epoch };
  }
}
