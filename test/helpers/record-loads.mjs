// Preloaded with `node --import` (test/services/cli-loads.test.ts): appends the URL of every module
// the process resolves to the file named by LOAD_LOG, through a module resolve hook.
import { register } from "node:module";

register(
  "data:text/javascript," +
    encodeURIComponent(`
import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (process.env.LOAD_LOG) appendFileSync(process.env.LOAD_LOG, resolved.url + "\\n");
  return resolved;
}
`),
);
