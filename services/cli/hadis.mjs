#!/usr/bin/env node
// The `hadis` command: runs the compiled CLI (dist/, built by `npm run build`, `npm start` or `npm test`).
import { existsSync } from "node:fs";

const main = new URL("../../dist/services/cli/main.js", import.meta.url);
if (!existsSync(main)) {
  process.stderr.write("hadis: the compiled CLI is missing (dist/): run `npm run build` (or `npm start`, which builds first)\n");
  process.exit(1);
}
await import(main.href);
