/**
 * The discriminator's verdict on a light image, the one rule the live discriminator and the
 * simulator share: accepted when the plan escalates nothing, or when it scores at least the
 * threshold of the share the plan escalates; a share of 1 escalates every image, the best included.
 */
export function acceptsLight(score: number, threshold: number, share: number): boolean {
  return share <= 0 || (share < 1 && score >= threshold);
}
