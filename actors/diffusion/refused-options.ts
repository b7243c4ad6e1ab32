/** Scheduler options refused by name: those of a config that a table of tests says change the sampling in ways not implemented. */

/** For each refused option, the test that its value is not the default. */
export type RefusalTable<C> = { [K in keyof C]?: (v: unknown) => boolean };

/** `name: value` of each option of `config` that `table` refuses. */
export function refusedOptions<C extends object>(config: C, table: RefusalTable<C>): string[] {
  return (Object.keys(table) as (keyof C)[])
    .filter((name) => table[name]!(config[name]))
    .map((name) => `${String(name)}: ${JSON.stringify(config[name])}`);
}
