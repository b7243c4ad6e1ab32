/**
 * Writes the JSON Schema of every public message (`contracts/public.ts`) to `schemas/<Name>.json`,
 * generated from the zod schemas. Run after changing a public message:
 * `node --import tsx tools/make-schemas.ts`; `test/contracts/schemas.test.ts` fails until the
 * committed files match.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PUBLIC_SCHEMAS, publicJsonSchema, type PublicSchemaName } from "../contracts/public.ts";

/** The folder the schemas are committed in. */
export const SCHEMAS_DIR = fileURLToPath(new URL("../schemas/", import.meta.url));

/** Each schema file's name and its text (two-space JSON and a newline). */
export function schemaFiles(): { file: string; text: string }[] {
  return (Object.keys(PUBLIC_SCHEMAS) as PublicSchemaName[]).map((name) => ({
    file: `${name}.json`,
    text: `${JSON.stringify(publicJsonSchema(name), null, 2)}\n`,
  }));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  mkdirSync(SCHEMAS_DIR, { recursive: true });
  for (const { file, text } of schemaFiles()) writeFileSync(join(SCHEMAS_DIR, file), text);
  process.stdout.write(`wrote ${Object.keys(PUBLIC_SCHEMAS).length} schemas to ${SCHEMAS_DIR}\n`);
}
