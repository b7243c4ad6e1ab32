/**
 * A small writer of CPLEX LP text (what HiGHS reads) for models built term by term: an
 * objective, named constraints, bounds and integrality. The artifact's allocators use it.
 */

/** A linear expression: [coefficient, variable] pairs. */
export type Terms = [number, string][];

const num = (x: number): string => {
  const s = Number(x.toPrecision(12)).toString();
  return s.includes("e") ? x.toFixed(12).replace(/0+$/, "").replace(/\.$/, "") : s;
};

/** `c1 v1 + c2 v2 …`, eight terms a line. */
function expression(terms: Terms): string {
  const parts: string[] = [];
  for (const [c, v] of terms) {
    if (c === 0) continue;
    const sign = c < 0 ? "-" : parts.length === 0 ? "" : "+";
    const mag = Math.abs(c) === 1 ? "" : `${num(Math.abs(c))} `;
    parts.push(`${sign}${sign ? " " : ""}${mag}${v}${parts.length % 8 === 7 ? "\n  " : ""}`);
  }
  return parts.join(" ");
}

/** Builds one LP model. Variables are continuous and ≥ 0 unless declared otherwise. */
export class LpBuilder {
  private objective: Terms = [];
  private sense: "Maximize" | "Minimize" = "Minimize";
  private readonly constraints: string[] = [];
  private readonly bounds: string[] = [];
  private readonly integers = new Set<string>();
  private readonly binaries = new Set<string>();
  private readonly seen = new Set<string>();

  /** Sets the objective. */
  objectiveOf(sense: "Maximize" | "Minimize", terms: Terms): this {
    this.sense = sense;
    this.objective = terms;
    for (const [, v] of terms) this.seen.add(v);
    return this;
  }

  /** Adds `terms op rhs` (a constraint without terms is dropped: it holds or fails on constants only). */
  constrain(name: string, terms: Terms, op: "<=" | ">=" | "=", rhs: number): this {
    const live = terms.filter(([c]) => c !== 0);
    if (live.length === 0) return this;
    for (const [, v] of live) this.seen.add(v);
    this.constraints.push(` ${name}: ${expression(live)} ${op} ${num(rhs)}`);
    return this;
  }

  /** Declares a binary variable. */
  binary(v: string): this {
    this.binaries.add(v);
    this.seen.add(v);
    return this;
  }

  /** Declares an integer variable with bounds. */
  integer(v: string, lo: number, hi: number): this {
    this.integers.add(v);
    this.seen.add(v);
    this.bounds.push(` ${num(lo)} <= ${v} <= ${num(hi)}`);
    return this;
  }

  /** The LP text. */
  toString(): string {
    const obj = expression(this.objective.filter(([c]) => c !== 0)) || `0 ${[...this.seen][0] ?? "dummy"}`;
    const out = [this.sense, ` obj: ${obj}`, "Subject To", ...this.constraints];
    if (this.bounds.length > 0) out.push("Bounds", ...this.bounds);
    const wrap = (names: string[]) => names.reduce((s, name, i) => s + (i % 10 === 0 ? "\n " : " ") + name, "");
    if (this.binaries.size > 0) out.push(`Binaries${wrap([...this.binaries])}`);
    if (this.integers.size > 0) out.push(`Generals${wrap([...this.integers])}`);
    out.push("End");
    return out.join("\n") + "\n";
  }
}
