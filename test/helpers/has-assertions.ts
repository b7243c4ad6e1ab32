/** Setup of the unit project: a unit test that asserts nothing fails (an assertion skipped by a branch or an early return is not a pass). */
import { beforeEach, expect } from "vitest";

beforeEach(() => {
  expect.hasAssertions();
});
