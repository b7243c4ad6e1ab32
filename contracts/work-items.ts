/**
 * Reading a work item where it enters a worker (the work queue), so the worker sees only typed
 * items: the item, or why it cannot be read and, when that much of it reads, where its result
 * goes (its router is told at once, rather than at the request's deadline).
 */
import { parseRaw, validate } from "./envelope.ts";
import { asHadisError, type HadisError } from "./errors.ts";
import { WorkItemAddressSchema, WorkItemSchema, type WorkItem, type WorkItemAddress } from "./messages.ts";

/** A work item that did not read: why, and its router's address when that much of it reads. */
export interface RefusedWorkItem {
  error: HadisError;
  address: WorkItemAddress | null;
}

/** A work item as read from the queue: typed, or refused. */
export type ReadWorkItem = { item: WorkItem } | { refused: RefusedWorkItem };

/** Reads and checks a queued work item (msgpack). */
export function readWorkItem(data: Uint8Array): ReadWorkItem {
  let raw: unknown; // parsed once: the whole item, or what of it says where its result goes
  try {
    raw = parseRaw(data);
    return { item: validate(WorkItemSchema, raw, "work item") };
  } catch (err) {
    return { refused: { error: asHadisError(err), address: raw === undefined ? null : addressOf(raw) } };
  }
}

/** Where the result of an item that did not validate goes, when that much of it reads. */
function addressOf(raw: unknown): WorkItemAddress | null {
  try {
    return validate(WorkItemAddressSchema, raw, "work item");
  } catch {
    return null;
  }
}
