/**
 * `hadis generate "<prompt>"`: one request, printed as a summary or as JSON; with `--preview`, the
 * light image the judge rejected first (printed, saved next to `--out`), then the final one.
 */
import { accessSync, constants, existsSync, statSync, writeFileSync } from "node:fs";
import { dirname, extname, resolve } from "node:path";
import { HadisError } from "../../contracts/errors.ts";
import type { Fallback, GenerateReplyRead } from "../../contracts/messages.ts";
import { HadisClient } from "../client/client.ts";
import type { NatsConnection } from "../nats/connection.ts";
import { clientError, connectTool, reportToolFailure, ToolFailure } from "./tool-connection.ts";

/** Options of `hadis generate`. */
export interface GenerateCommandOptions {
  /** NATS server URL(s); default `NATS_URL`, else where `npm start` listens. */
  nats?: string;
  deadlineMs?: number;
  seed?: number;
  idempotencyKey?: string;
  out?: string;
  json?: boolean;
  /** Ask for the light image as soon as it exists when the judge rejects it (saved to `previewPathOf(out)`), then the final one. */
  preview?: boolean;
}

/** Where `--preview` saves the preview next to `--out`: `out.png` → `out.preview.png` (`out` → `out.preview`). */
export function previewPathOf(out: string): string {
  const ext = extname(out);
  return `${out.slice(0, out.length - ext.length)}.preview${ext}`;
}

/**
 * Sends the prompt and prints how it was served; exits 1 on an error reply or a local failure.
 * With `--json` every outcome is one JSON object on stdout (`{"error": …}` for failures); with
 * `--preview` a preview comes first, as an object (`"final": false`) or a summary of its own.
 */
export async function generateCommand(prompt: string, opts: GenerateCommandOptions, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let nc: NatsConnection | null = null;
  try {
    // Checked before the request: a GPU's image must not be made for a file that cannot be written.
    if (opts.out) checkWritable(opts.out);
    if (opts.out && opts.preview) checkWritable(previewPathOf(opts.out));
    nc = await connectTool(opts.nats, env, "client", "hadis-cli");
    let previewed = false;
    const reply = await new HadisClient(nc).generate(
      {
        prompt,
        ...(opts.deadlineMs !== undefined ? { deadlineMs: opts.deadlineMs } : {}),
        ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
        ...(opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {}),
        ...(opts.preview ? { preview: true } : {}),
      },
      { onPreview: (preview) => void ((previewed = true), showPreview(preview, opts)) },
    );
    let unsaved: string | null = null;
    if (opts.out) {
      try {
        writeFileSync(opts.out, reply.image);
      } catch (err) {
        process.exitCode = 1;
        unsaved = `cannot write --out ${opts.out}: ${(err as Error).message}`;
      }
    }
    if (opts.json) {
      // One object either way: the reply, and the error when the image could not be written.
      const body = { ...reply, image: { bytes: reply.image.byteLength, format: reply.imageFormat } };
      process.stdout.write(JSON.stringify(unsaved ? { error: clientError(unsaved), reply: body } : body) + "\n");
      return;
    }
    if (unsaved) process.stderr.write(`${unsaved} (the reply follows)\n`);
    if (previewed) process.stdout.write(`final: ${reply.servedBy}'s image\n`);
    process.stdout.write(summary(reply, unsaved ? null : (opts.out ?? null)));
  } catch (err) {
    if (err instanceof ToolFailure) return reportToolFailure(err, opts.json);
    process.exitCode = 1;
    const e = err instanceof HadisError ? err : new HadisError("internal", String((err as Error).message ?? err));
    if (opts.json)
      process.stdout.write(
        JSON.stringify({ error: { code: e.code, status: e.status, message: e.message, retryable: e.retryable, details: e.details } }) +
          "\n",
      );
    else process.stderr.write(errorText(e));
  } finally {
    await nc?.close();
  }
}

/**
 * Prints (and saves, with `--out`) a preview as it comes: the light image, rejected by the judge,
 * while the heavy model makes the final one. One that cannot be saved is said, not fatal: the
 * final image is what the command is for.
 */
function showPreview(preview: GenerateReplyRead, opts: GenerateCommandOptions): void {
  const path = opts.out ? previewPathOf(opts.out) : null;
  let unsaved: string | null = null;
  if (path) {
    try {
      writeFileSync(path, preview.image);
    } catch (err) {
      unsaved = `cannot write the preview to ${path}: ${(err as Error).message}`;
    }
  }
  if (opts.json) {
    process.stdout.write(JSON.stringify({ ...preview, image: { bytes: preview.image.byteLength, format: preview.imageFormat } }) + "\n");
    if (unsaved) process.stderr.write(`${unsaved}\n`);
    return;
  }
  if (unsaved) process.stderr.write(`${unsaved} (the preview follows)\n`);
  process.stdout.write(`preview: ${preview.servedBy}'s image, rejected by the discriminator; the heavy model is making the final one\n`);
  process.stdout.write(summary(preview, unsaved ? null : path));
}

/** Refuses an `--out` path whose folder is missing or read-only, or that names a folder or a read-only file. */
function checkWritable(path: string): void {
  const full = resolve(path);
  try {
    if (existsSync(full)) {
      if (statSync(full).isDirectory()) throw new Error("it is a folder");
      accessSync(full, constants.W_OK);
    } else {
      accessSync(dirname(full), constants.W_OK);
    }
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? `no folder ${dirname(full)}` : (err as Error).message;
    throw new ToolFailure(`cannot write --out ${path}: ${reason}; nothing was sent`);
  }
}

/** What each fallback means, for the summary line. */
const FALLBACK_TEXT: Record<Fallback, string> = {
  heavy_failed: "the light image, served because the heavy model failed it",
  no_time_for_heavy:
    "the light image, served because the time left could not fit the heavy model (the discriminator rejected it, or hadis-plus's admission sent a hard prompt to the light model)",
  heavy_late: "the light image, served because the heavy image had not come as the deadline neared",
  judge_failed: "the light image, served because the discriminator could not judge it",
  no_time_to_judge: "the light image, served because no time was left to judge it",
  heavy_moved: "made by another model than the heavy one decided: the plan in force had taken that model's workers away",
};

function summary(reply: GenerateReplyRead, saved: string | null): string {
  const t = reply.timings;
  return (
    [
      `request ${reply.requestId}: ${reply.route} → ${reply.servedBy} (plan epoch ${reply.planEpoch})${reply.deduplicated ? " — deduplicated: the first reply for this idempotency key, not a new image" : ""}`,
      `  difficulty ${reply.difficulty.toFixed(3)} (router share ${reply.routerThreshold})` +
        (reply.score !== undefined ? `, discriminator score ${reply.score.toFixed(4)} vs threshold ${reply.threshold!.toFixed(4)}` : ""),
      ...(reply.fallback
        ? [`  ${FALLBACK_TEXT[reply.fallback as Fallback] ?? "not the image the cascade meant"} (fallback ${reply.fallback})`]
        : []),
      ...(reply.admission ? [`  ${admissionText(reply.admission)}`] : []),
      `  image ${reply.width}x${reply.height} PNG, ${reply.image.byteLength} bytes, seed ${reply.seed}${saved ? `, saved to ${saved}` : ""}`,
      `  timings ms: route ${t.routeMs.toFixed(1)}, queue ${t.queueWaitMs.toFixed(1)}, light ${t.lightMs.toFixed(1)}, judge ${t.judgeMs.toFixed(1)}, heavy ${t.heavyMs.toFixed(1)}, total ${t.totalMs.toFixed(1)}`,
    ].join("\n") + "\n"
  );
}

/** hadis-plus's admission as a line: its choice and the estimate it was made on. */
function admissionText(a: NonNullable<GenerateReplyRead["admission"]>): string {
  const choice = { cascade: "the whole cascade", heavy: "straight to the heavy model", light: "the light image only" }[a.choice];
  return `admission: ${choice} (${a.leftMs} ms left; estimated light ${a.lightMs}, judge ${a.judgeMs}, heavy ${a.heavyMs} ms)`;
}

/** An error reply as a line, with what the caller can act on: the field at fault, when to retry. */
function errorText(e: HadisError): string {
  const notes = [
    typeof e.details.field === "string" ? `field ${e.details.field}` : "",
    typeof e.details.retryAfterMs === "number" ? `retry after ${e.details.retryAfterMs} ms` : e.retryable ? "retryable" : "",
  ].filter(Boolean);
  return `error ${e.code} (${e.status}): ${e.message}${notes.length ? ` [${notes.join("; ")}]` : ""}\n`;
}
