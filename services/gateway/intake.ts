/** What the gateway checks of a request before sending anything to NATS: what the router would refuse without a plan. */
import { validate } from "../../contracts/envelope.ts";
import { GenerateRequestSchema, type GenerateRequest } from "../../contracts/messages.ts";

/**
 * The request a JSON body holds, or the typed error the router would answer it with: the schema
 * owns every rule (unknown fields, types, bounds, a size given whole, a blank or too long prompt, a
 * too long negative prompt). Whether its settings suit the models of the plan in force is the
 * router's to say (it knows the plan): one NATS round trip, with nothing queued.
 */
export function checkGatewayRequest(body: unknown): GenerateRequest {
  return validate(GenerateRequestSchema, body, "generate request");
}
