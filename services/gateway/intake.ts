/** What the gateway checks of a request before sending anything to NATS: what the router would refuse without a plan. */
import { HadisError } from "../../contracts/errors.ts";
import { validate } from "../../contracts/envelope.ts";
import { GenerateRequestSchema, MAX_PROMPT_CHARS, promptChars, type GenerateRequest } from "../../contracts/messages.ts";

/**
 * The request a JSON body holds, or the typed error the router would answer it with: the schema
 * (unknown fields, types, bounds, a size given whole), an empty or too long prompt, a too long
 * negative prompt. Whether its settings suit the models of the plan in force is the router's to
 * say (it knows the plan): one NATS round trip, with nothing queued.
 */
export function checkGatewayRequest(body: unknown): GenerateRequest {
  const request = validate(GenerateRequestSchema, body, "generate request");
  const prompt = request.prompt.trim();
  if (prompt.length === 0) throw new HadisError("invalid_request", "prompt is empty", { field: "prompt" });
  for (const [field, text] of [["prompt", prompt], ["negativePrompt", request.negativePrompt]] as const) {
    const chars = text === undefined ? 0 : promptChars(text);
    if (chars > MAX_PROMPT_CHARS) throw new HadisError("prompt_too_long", `${field} has ${chars} characters; the limit is ${MAX_PROMPT_CHARS}`, { field });
  }
  return request;
}
