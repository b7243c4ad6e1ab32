/**
 * hadis-plus's admission of one request, as its reply carries it: what the router chose from the
 * path ahead and the estimate it chose on (`actors/routing/deadline-aware.ts` decides).
 */
import { z } from "zod";

/** What the admission decides. */
export const AdmissionChoices = {
  /** Light, judge, and the heavy model if rejected: everything fits. */
  cascade: "cascade",
  /** Straight to the heavy model: light and heavy cannot both fit, the heavy alone does, and it has room. */
  heavy: "heavy",
  /** The light image only: a rejected (or, for a hard prompt, unjudged) one is served, `no_time_for_heavy`. */
  light: "light",
} as const;
/** One admission choice. */
export type AdmissionChoice = (typeof AdmissionChoices)[keyof typeof AdmissionChoices];

const ms = z.number().finite().nonnegative();

/** The choice and its estimate, ms: time left at admission, and each stage (queue wait included). */
export const AdmissionSchema = z.strictObject({
  choice: z.enum([AdmissionChoices.cascade, AdmissionChoices.heavy, AdmissionChoices.light]),
  leftMs: ms,
  lightMs: ms,
  judgeMs: ms,
  heavyMs: ms,
});
/** An admission as the reply carries it. */
export type Admission = z.infer<typeof AdmissionSchema>;
