// Golden-file assertions for renderers: the expected output lives in a file reviewers can read.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** True when this run rewrites golden files instead of comparing (`UPDATE_GOLDEN=1`). */
export const updatingGolden = process.env["UPDATE_GOLDEN"] === "1";

/**
 * Compares `actual` with the file `dir/name`; with `UPDATE_GOLDEN=1` writes it instead.
 * Uses node:assert, not Jest's expect, so it works from any test runner and keeps this module free
 * of test-framework types.
 */
export function expectGolden(name: string, actual: string, dir: string): void {
  const path = join(dir, name);
  if (updatingGolden) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, actual);
    return;
  }
  let expected: string;
  try {
    expected = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    throw new Error(`golden file ${path} is missing; create it with UPDATE_GOLDEN=1`, { cause: err });
  }
  assert.equal(actual, expected, `output differs from golden file ${path} (UPDATE_GOLDEN=1 rewrites it)`);
}
