/**
 * `hadis status`: what a running system is doing, from the operator's terminal: the plan in force
 * (asked of the resource manager) and every worker as its heartbeat says (listened to for a
 * moment), with the workers whose model is not yet the plan's and those that failed.
 */
import type { z } from "zod";
import { decode } from "../../contracts/envelope.ts";
import { ManagerPlanReplySchema, WorkerHeartbeatSchema, type Plan, type WorkerHeartbeat } from "../../contracts/messages.ts";
import { ServiceNames, subjects as buildSubjects, type Subjects } from "../../contracts/subjects.ts";
import { inboxPrefix, newInbox, type NatsConnection } from "../nats/connection.ts";
import { connectTool, reportToolFailure, ToolFailure } from "./tool-connection.ts";

/** Options of `hadis status`. */
export interface StatusCommandOptions {
  /** NATS server URL(s); default `NATS_URL`, else where `npm start` listens. */
  nats?: string;
  /** How long to listen to heartbeats, ms (workers beat every second). */
  listenMs?: number;
  json?: boolean;
}

/** A running system as `hadis status` sees it. */
export interface SystemStatus {
  /** Whether a resource manager answered. */
  manager: boolean;
  plan: Plan | null;
  demandQps: number | null;
  /** The newest heartbeat of each worker heard, by id. */
  workers: WorkerHeartbeat[];
  /** Ids of the routers that answered `$SRV.PING`. */
  routers: string[];
  /** Whether a request can be served now: a router answers, a worker is heard, and the plan in force (if known) gives some model a worker. */
  serving: boolean;
  /** Why not, when not serving. */
  notServing: string[];
}

/** Why a system with this much cannot serve a request now (none: it can). */
export function whyNotServing(s: Pick<SystemStatus, "plan" | "workers" | "routers">, listenMs: number): string[] {
  const why: string[] = [];
  if (s.routers.length === 0) why.push(`no router answered $SRV.PING within ${listenMs} ms`);
  if (s.workers.length === 0) why.push(`no worker heard within ${listenMs} ms`);
  else if (s.plan && Object.values(s.plan.models).every((a) => a.workers === 0))
    why.push(`the plan in force (epoch ${s.plan.epoch}) gives no model a worker`);
  return why;
}

/** How long the resource manager has to answer for its plan (a tick's solve may hold it up), ms. */
const PLAN_ANSWER_MS = 3_000;

/** Asks the resource manager for its plan (waiting up to `answerMs`) and listens to heartbeats for `listenMs`. */
export async function readStatus(
  nc: NatsConnection,
  subjects: Subjects,
  listenMs: number,
  answerMs = PLAN_ANSWER_MS,
): Promise<SystemStatus> {
  const beats = new Map<string, WorkerHeartbeat>();
  const sub = nc.subscribe(subjects.workerHeartbeatAll, {
    callback: (_err, msg) => {
      const beat = decodeOrNull(WorkerHeartbeatSchema, msg.data);
      if (beat) beats.set(beat.workerId, beat);
    },
  });
  // Every router answers a ping (the standard micro-service discovery), under this tool's own inbox.
  const routers = new Set<string>();
  const inbox = newInbox(inboxPrefix(nc));
  const pings = nc.subscribe(inbox, {
    callback: (_err, msg) => {
      const id = routerIdOf(msg.data);
      if (id) routers.add(id);
    },
  });
  nc.publish(`$SRV.PING.${ServiceNames.router}`, new Uint8Array(), { reply: inbox });
  const [answer] = await Promise.all([
    nc.request(subjects.managerPlan, new Uint8Array(), { timeout: answerMs }).then(
      (msg) => decodeOrNull(ManagerPlanReplySchema, msg.data),
      () => null,
    ),
    new Promise((r) => setTimeout(r, listenMs)),
  ]);
  sub.unsubscribe();
  pings.unsubscribe();
  const found = {
    manager: answer !== null,
    plan: answer?.plan ?? null,
    demandQps: answer?.demandQps ?? null,
    workers: [...beats.values()].sort((a, b) => (a.workerId < b.workerId ? -1 : 1)),
    routers: [...routers].sort(),
  };
  const notServing = whyNotServing(found, listenMs);
  return { ...found, serving: notServing.length === 0, notServing };
}

/** The router id a `$SRV.PING` answer names (its metadata's, else the service instance's), or null. */
function routerIdOf(data: Uint8Array): string | null {
  try {
    const pong = JSON.parse(new TextDecoder().decode(data)) as { id?: unknown; metadata?: { routerId?: unknown } };
    const id = pong.metadata?.routerId ?? pong.id;
    return typeof id === "string" ? id.slice(0, 128) : null;
  } catch {
    return null;
  }
}

/** The message `data` holds, or null when it is not one (a status read skips what it cannot read). */
function decodeOrNull<S extends z.ZodType>(schema: S, data: Uint8Array): z.infer<S> | null {
  try {
    return decode(schema, data, "message");
  } catch {
    return null;
  }
}

const n = (x: number, digits = 2) => Number(x.toFixed(digits)).toString();

/** The status as lines of text. */
export function formatStatus(s: SystemStatus): string {
  const lines: string[] = [];
  const p = s.plan;
  lines.push(
    s.serving
      ? `serving: ${s.routers.length} router${s.routers.length === 1 ? "" : "s"} answered, ${s.workers.length} worker${s.workers.length === 1 ? "" : "s"} heard`
      : `not serving: ${s.notServing.join("; ")}`,
  );
  if (!s.manager) lines.push("no resource manager answered on the plan endpoint: is one running (and may this user ask it)?");
  else if (!p) lines.push("the resource manager has made no plan yet (no workers heard from?)");
  if (p) {
    const pair = p.pair.light === p.pair.heavy ? p.pair.light : `${p.pair.light} → ${p.pair.heavy}`;
    lines.push(
      `plan epoch ${p.epoch} (${p.policy}): ${pair}, router share ${n(p.routerThreshold)}, discriminator threshold at the ${n(p.discThreshold)} quantile of scores, SLO ${n(p.sloMs / 1_000)} s` +
        (s.demandQps !== null ? `; demand estimate ${n(s.demandQps, 1)} qps` : "") +
        (p.capacityQps !== undefined ? `, capacity ${n(p.capacityQps, 1)} qps` : ""),
    );
    for (const [model, a] of Object.entries(p.models))
      lines.push(`  ${model}: ${a.workers} worker${a.workers === 1 ? "" : "s"}, batch ${a.batchSize}`);
    lines.push(`  reason: ${p.reason}`);
    // Under --fidelity artifact (or --mechanisms) every service follows the mechanisms the plan names.
    if (p.mechanisms?.length) lines.push(`  the paper artifact's mechanisms in force: ${p.mechanisms.join(", ")}`);
  }
  const states = new Map<string, number>();
  for (const w of s.workers) states.set(w.state, (states.get(w.state) ?? 0) + 1);
  lines.push(
    `workers heard (${s.workers.length})${s.workers.length > 0 ? ": " + [...states].map(([st, k]) => `${k} ${st}`).join(", ") : ""}`,
  );
  const idWidth = Math.max(0, ...s.workers.map((w) => w.workerId.length));
  for (const w of s.workers) {
    const assigned = p?.assignment[w.workerId];
    const notes = [
      p && assigned === undefined
        ? "not in the plan (benched, or joined since)"
        : assigned !== undefined && assigned !== w.model
          ? `plan: ${assigned}`
          : "",
      w.failedModel ? (w.model === w.failedModel ? `batches of ${w.failedModel} failing` : `failed to load ${w.failedModel}`) : "",
      w.lastError && !w.failedModel ? w.lastError : "",
      // A worker whose batches ran only in parts takes smaller ones (out of memory, most likely).
      w.batchCap !== undefined ? `batches capped at ${w.batchCap} (a bigger one ran only in parts)` : "",
    ].filter(Boolean);
    lines.push(
      `  ${w.workerId.padEnd(idWidth)}  ${(w.model ?? "-").padEnd(18)} ${w.state.padEnd(9)} batch ${String(w.batchSize).padEnd(3)} served ${String(w.servedTotal).padEnd(7)} epoch ${w.planEpoch}${notes.length ? "  " + notes.join("; ") : ""}`,
    );
  }
  return lines.join("\n") + "\n";
}

/**
 * Prints the status of the system behind `--nats`. Exits 1 when NATS cannot be reached, 2 when
 * it is not serving (no router answered, no worker was heard, the plan gives no model a worker)
 * or no resource manager answered: scripts and health checks can tell.
 */
export async function statusCommand(opts: StatusCommandOptions, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let nc: NatsConnection;
  try {
    nc = await connectTool(opts.nats, env, "observer", "hadis-status");
  } catch (err) {
    if (err instanceof ToolFailure) return reportToolFailure(err, opts.json);
    throw err;
  }
  try {
    const status = await readStatus(nc, buildSubjects(), opts.listenMs ?? 1_500);
    process.stdout.write(opts.json ? JSON.stringify(status) + "\n" : formatStatus(status));
    if (!status.manager || !status.serving) process.exitCode = 2;
  } finally {
    await nc.close();
  }
}
