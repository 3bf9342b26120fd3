import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectGolden, updatingGolden } from "./golden.ts";

// These cases compare; under UPDATE_GOLDEN=1 the helper writes instead, so they do not apply.
const compare = updatingGolden ? it.skip : it;

describe("expectGolden", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "plb-golden-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  compare("passes on equal text and fails on any difference", () => {
    writeFileSync(join(dir, "a.conf"), "one\ntwo\n");
    expectGolden("a.conf", "one\ntwo\n", dir);
    expect(() => expectGolden("a.conf", "one\ntwo", dir)).toThrow(/differs from golden file .*a\.conf/);
  });

  compare("tells how to create a missing golden file", () => {
    expect(() => expectGolden("missing.conf", "x", dir)).toThrow(/missing; create it with UPDATE_GOLDEN=1/);
  });
});
