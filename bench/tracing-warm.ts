/**
 * What one request's tracing costs the CPU on its own, in a warm loop: the spans of a judged light
 * request as the router, a worker and the discriminator make them (root, route, generation
 * stage, queue, execute, judge, reply, and a batch span every fifth request, as in the pipeline at
 * zero model latency), with the two `traceparent` injections and extractions between them,
 * through the services' own telemetry code. "record" hands spans to a processor that drops them;
 * "export" encodes them as OTLP protobuf (`OtlpStreamProcessor`) for a transport that only counts
 * the bytes. Modes alternate block by block in one process. `--in-flight N` ends each request's
 * root and stage spans N requests later, as requests in flight keep them open. Set against bench/tracing-profile.ts's
 * figures for the same work inside the pipeline, the gap is what running among the pipeline's
 * own objects costs (garbage collection of longer-lived objects, caches), not the tracing code.
 *
 *   node --import tsx bench/tracing-warm.ts [--requests 20000] [--blocks 15] [--in-flight 0]
 */
import { configureTelemetry, ServiceTelemetry, SpanKind, type SpanContext } from "../services/lib/telemetry.ts";
import { OtlpStreamProcessor } from "../services/lib/otlp-export.ts";
import { median, percentile, r2, writeResult } from "./lib.ts";

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]]));
const perBlock = Number(args.get("--requests") ?? 20_000);
const blocks = Number(args.get("--blocks") ?? 15);
const inFlight = Number(args.get("--in-flight") ?? 0);
/** The ends of the requests still in flight (`--in-flight`), oldest first at `next`. */
const open: (() => void)[] = Array.from({ length: inFlight }, () => () => undefined);
let next = 0;

let exportedBytes = 0;
const countingTransport = {
  export(bytes: Uint8Array, done: (result: { code: number }) => void) {
    exportedBytes += bytes.length;
    done({ code: 0 }); // ExportResultCode.SUCCESS
  },
  shutdown: async () => undefined,
};
const dropping = { onStart() {}, onEnd() {}, shutdown: async () => undefined, forceFlush: async () => undefined };

/** The three services' telemetry under one processor: `record` drops spans, `export` encodes them. */
function servicesFor(mode: "record" | "export") {
  const processor = mode === "export" ? new OtlpStreamProcessor(countingTransport, { maxQueueSize: 8_192, maxExportBatchSize: 1_024, scheduledDelayMillis: 5_000 }) : dropping;
  configureTelemetry({ enabled: true, spanSink: false, otlpUrl: null, processors: [processor as never] });
  return { router: new ServiceTelemetry("hadis-router", null, "r-1"), worker: new ServiceTelemetry("hadis-worker", null, "w-1"), judge: new ServiceTelemetry("hadis-discriminator", null, "d-1") };
}

/** One judged light request's spans, with the attributes the services give them. */
function request(s: ReturnType<typeof servicesFor>, i: number): void {
  const requestId = `req-${i}`;
  const root = s.router.start("hadis.generate", { kind: SpanKind.SERVER, attributes: { "messaging.system": "nats", "messaging.destination.name": "hadis.generate", "hadis.router_id": "r-1" } });
  root.setAttribute("hadis.request_id", requestId).setAttributes({ "hadis.deadline_ms": 60_000, "hadis.seed": i });
  const route = s.router.start("route", { kind: SpanKind.INTERNAL, attributes: {} }, root.spanContext());
  route.setAttributes({ "hadis.route.hard": false, "hadis.difficulty": 0.31, "hadis.router_threshold": 0.5, "hadis.pair.light": "sdxl-lightning", "hadis.pair.heavy": "sd35-large", "hadis.plan_epoch": 3, "hadis.skip_judge": false });
  route.end();
  const stage = s.router.start("light sdxl-lightning", { kind: SpanKind.PRODUCER, attributes: { "hadis.stage": "light", "hadis.model": "sdxl-lightning", "hadis.plan_epoch": 3 } }, root.spanContext());
  const parent = s.worker.extract(s.router.inject(stage.spanContext())) as SpanContext;
  const now = Date.now();
  const attributes = () => ({ "hadis.model": "sdxl-lightning", "hadis.worker_id": "w-1", "hadis.batch_size": 5, "hadis.request_id": requestId });
  const batch = i % 5 === 0 ? s.worker.start("batch sdxl-lightning", { kind: SpanKind.INTERNAL, startTime: now, links: [{ context: parent }], attributes: { "hadis.model": "sdxl-lightning", "hadis.worker_id": "w-1", "hadis.batch_size": 5 } }) : null;
  s.worker.start("queue sdxl-lightning", { kind: SpanKind.CONSUMER, startTime: now - 3, attributes: attributes() }, parent).end(now);
  const execute = s.worker.start("execute sdxl-lightning", { kind: SpanKind.CONSUMER, startTime: now, links: batch ? [{ context: batch.spanContext() }] : [], attributes: attributes() }, parent);
  execute.end(now + 1);
  batch?.end(now + 1);
  const endStage = () => {
    stage.setAttribute("hadis.served_model", "sdxl-lightning");
    stage.end();
  };
  if (inFlight === 0) endStage();
  const judged = s.judge.extract(s.router.inject(root.spanContext())) as SpanContext;
  const judge = s.judge.start("judge", { kind: SpanKind.SERVER, attributes: { "hadis.judge.backend": "profile" } }, judged);
  judge.setAttributes({ "hadis.model": "sdxl-lightning", "hadis.disc.score": 0.42, "hadis.disc.threshold": 0.2, "hadis.disc.accept": true, "hadis.plan_epoch": 3 });
  judge.end();
  s.router.start("reply", { kind: SpanKind.INTERNAL, attributes: { "hadis.encoding": "msgpack" } }, root.spanContext()).end();
  root.setAttributes({
    "hadis.request_id": requestId, "hadis.route": "light", "hadis.served_by": "sdxl-lightning", "hadis.models": ["sdxl-lightning"], "hadis.plan_epoch": 3,
    "hadis.difficulty": 0.31, "hadis.router_threshold": 0.5, "hadis.total_ms": 12.5, "hadis.slo_ms": 60_000, "hadis.slo_met": true, "hadis.outcome": "ok",
    "hadis.disc.score": 0.42, "hadis.disc.threshold": 0.2,
  });
  if (inFlight === 0) return root.end();
  const oldest = open[next];
  open[next] = () => {
    endStage();
    root.end();
  };
  next = (next + 1) % inFlight;
  oldest();
}

function main() {
  const modes = ["record", "export"] as const;
  const perRequest: Record<string, number[]> = { record: [], export: [] };
  let exportedRequests = 0;
  // Warm-up: both modes' code compiled before anything is timed.
  for (const mode of modes) {
    const s = servicesFor(mode);
    for (let i = 0; i < perBlock; i++) request(s, i);
  }
  for (let b = 0; b < blocks; b++) {
    for (const mode of b % 2 === 0 ? modes : [...modes].reverse()) {
      const s = servicesFor(mode);
      const before = exportedBytes;
      const t = performance.now();
      for (let i = 0; i < perBlock; i++) request(s, i);
      perRequest[mode].push(((performance.now() - t) * 1_000) / perBlock);
      if (mode === "export") exportedRequests += perBlock;
      if (mode === "record" && exportedBytes !== before) throw new Error("the record mode exported");
    }
  }
  // Spans still held by the last export processor are not counted: their bytes are not sent yet.
  const summary = Object.fromEntries(modes.map((m) => [m, { usPerRequest: r2(median(perRequest[m])), quartiles: [r2(percentile(perRequest[m], 25)), r2(percentile(perRequest[m], 75))] }]));
  const bytesPerRequest = Math.round(exportedBytes / exportedRequests);
  console.table(summary);
  console.log(`${blocks} blocks of ${perBlock} requests a mode${inFlight ? `, ${inFlight} in flight` : ""}; about ${bytesPerRequest} OTLP bytes a request exported`);
  console.log("wrote", writeResult(inFlight ? "tracing-warm-in-flight" : "tracing-warm", { date: new Date().toISOString(), perBlock, blocks, inFlight, summary, bytesPerRequest, perRequest }));
}

main();
