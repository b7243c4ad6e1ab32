/**
 * What the router counts: requests received, replied, failed and in flight (its `$SRV.STATS`), and
 * since its last load report the arrivals and SLO outcomes the resource manager and the dashboard
 * read (`hadis.stats.router.<id>`, every second and once more at stop).
 */
import { encode } from "../../contracts/envelope.ts";
import { asHadisError } from "../../contracts/errors.ts";
import { PROTOCOL_VERSION, type RouterStats } from "../../contracts/messages.ts";
import type { Subjects } from "../../contracts/subjects.ts";
import type { SloOutcome } from "../../actors/request/reply.ts";
import { watchConnection, type NatsConnection } from "../nats/connection.ts";

/** The router's counters. */
export class RouterTally {
  readonly counters = { received: 0, replied: 0, errors: 0, refused: 0, inFlight: 0, arrivalsSinceReport: 0 };
  /** Outcomes since the last load report (the dashboard's served and SLO series). */
  readonly outcomes = { served: 0, answered: 0, violations: 0 };
  readonly errorsByCode: Record<string, number> = {};
  /** Items queued per model since the last report (the artifact's per-model load signal). */
  readonly enqueuedSinceReport = new Map<string, number>();

  /** Counts an item queued for `model`. */
  enqueued(model: string): void {
    this.enqueuedSinceReport.set(model, (this.enqueuedSinceReport.get(model) ?? 0) + 1);
  }

  /** Counts a request's SLO outcome. */
  slo(o: SloOutcome): void {
    this.outcomes.served += Number(o.served);
    this.outcomes.answered += Number(o.answered);
    this.outcomes.violations += Number(o.violated);
  }

  /** Counts an error reply by its code. */
  error(err: unknown): void {
    this.counters.errors++;
    const code = asHadisError(err).code;
    this.errorsByCode[code] = (this.errorsByCode[code] ?? 0) + 1;
  }
}

/** The router's load reports. */
export interface LoadReports {
  /** Publishes what happened since the last report sent (skipped while the connection is down). */
  report(): void;
  /** Stops the timer. */
  stop(): void;
}

/** Publishes the router's load report every `everyMs`. */
export function startLoadReports(
  nc: NatsConnection,
  subjects: Subjects,
  routerId: string,
  tally: RouterTally,
  everyMs: number,
): LoadReports {
  let lastReportMs = Date.now();
  const report = () => {
    // Not while the connection is down (nats.js would drop it, and its arrivals with it): the next
    // report covers the whole time since the last one sent.
    if (!watchConnection(nc).connected) return;
    const now = Date.now();
    const stats: RouterStats = {
      v: PROTOCOL_VERSION,
      routerId,
      arrivals: tally.counters.arrivalsSinceReport,
      intervalMs: Math.max(1, now - lastReportMs),
      inFlight: tally.counters.inFlight,
      ...tally.outcomes,
      ...(tally.enqueuedSinceReport.size > 0 ? { enqueued: Object.fromEntries(tally.enqueuedSinceReport) } : {}),
      sentAtMs: now,
    };
    nc.publish(subjects.routerStats(routerId), encode(stats));
    tally.counters.arrivalsSinceReport = 0;
    tally.enqueuedSinceReport.clear();
    tally.outcomes.served = tally.outcomes.answered = tally.outcomes.violations = 0;
    lastReportMs = now;
  };
  const timer = setInterval(report, everyMs);
  timer.unref();
  return { report, stop: () => clearInterval(timer) };
}
