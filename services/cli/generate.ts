/** `hadis generate "<prompt>"`: one request, printed as a summary or as JSON. */
import { writeFileSync } from "node:fs";
import { HadisError } from "../../contracts/errors.ts";
import { HadisClient } from "../lib/client.ts";
import { connectNats } from "../lib/nats.ts";
import { natsTlsFromEnv, natsUrls, tlsOption, toolCredentials } from "./credentials.ts";

/** Options of `hadis generate`. */
export interface GenerateCommandOptions {
  nats: string;
  deadlineMs?: number;
  seed?: number;
  idempotencyKey?: string;
  out?: string;
  json?: boolean;
}

/** Sends the prompt and prints how it was served; exits non-zero on an error reply. */
export async function generateCommand(prompt: string, opts: GenerateCommandOptions, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const credentials = toolCredentials(env, "client");
  const nc = await connectNats(natsUrls(opts.nats), "hadis-cli", { maxReconnectAttempts: 0, timeout: 3_000, ...credentials, ...tlsOption(natsTlsFromEnv(env)) }).catch((err) => {
    throw new Error(`cannot reach NATS at ${opts.nats} (${(err as Error).message}); is \`npm start\` running${credentials ? `, and are the credentials of ${credentials.user} right` : ""}?`);
  });
  try {
    const reply = await new HadisClient(nc).generate({
      prompt,
      ...(opts.deadlineMs !== undefined ? { deadlineMs: opts.deadlineMs } : {}),
      ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
      ...(opts.idempotencyKey ? { idempotencyKey: opts.idempotencyKey } : {}),
    });
    if (opts.out) writeFileSync(opts.out, reply.image);
    if (opts.json) {
      process.stdout.write(JSON.stringify({ ...reply, image: { bytes: reply.image.byteLength, format: reply.imageFormat } }) + "\n");
      return;
    }
    const t = reply.timings;
    const lines = [
      `request ${reply.requestId}: ${reply.route} → ${reply.servedBy} (plan epoch ${reply.planEpoch})`,
      `  difficulty ${reply.difficulty.toFixed(3)} (router share ${reply.routerThreshold})` +
        (reply.score !== undefined ? `, discriminator score ${reply.score.toFixed(4)} vs threshold ${reply.threshold!.toFixed(4)}` : ""),
      `  image ${reply.width}x${reply.height} PNG, ${reply.image.byteLength} bytes, seed ${reply.seed}${opts.out ? `, saved to ${opts.out}` : ""}`,
      `  timings ms: route ${t.routeMs.toFixed(1)}, queue ${t.queueWaitMs.toFixed(1)}, light ${t.lightMs.toFixed(1)}, judge ${t.judgeMs.toFixed(1)}, heavy ${t.heavyMs.toFixed(1)}, total ${t.totalMs.toFixed(1)}`,
    ];
    process.stdout.write(lines.join("\n") + "\n");
  } catch (err) {
    const e = err instanceof HadisError ? err : new HadisError("internal", String((err as Error).message ?? err));
    if (opts.json) process.stdout.write(JSON.stringify({ error: { code: e.code, status: e.status, message: e.message, retryable: e.retryable, details: e.details } }) + "\n");
    else process.stderr.write(`error ${e.code} (${e.status}): ${e.message}\n`);
    process.exitCode = 1;
  } finally {
    await nc.close();
  }
}
