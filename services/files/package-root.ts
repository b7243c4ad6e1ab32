/**
 * Where the package's own files are (profiles/, bench/results/, the dashboard's page, plain
 * JavaScript worker entries): the folder of the nearest package.json above this module, so the same
 * code finds them run from source (services/files/) and compiled (dist/services/files/).
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** The package's root folder (absolute). */
export const PACKAGE_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));

/** The absolute path of a file of the package, given from its root (`profiles/pool.json`). */
export function packagePath(...parts: string[]): string {
  return join(PACKAGE_ROOT, ...parts);
}

/** The file URL of a file of the package, given from its root (a worker thread's entry). */
export function packageUrl(...parts: string[]): URL {
  return pathToFileURL(packagePath(...parts));
}
