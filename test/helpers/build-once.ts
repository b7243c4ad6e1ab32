/**
 * Global setup of every test run: compiles dist/ when a source is newer (what `npm test` and
 * `npm start` run first anyway), so the processes tests spawn run the compiled `hadis` as an
 * operator's does, and start in a fraction of the time `tsx` takes to compile the sources.
 */
// @ts-expect-error a plain JavaScript module without declarations
import { build } from "../../ops/scripts/build.mjs";

export default function setup(): void {
  (build as (opts: { quiet: boolean }) => boolean)({ quiet: true });
}
