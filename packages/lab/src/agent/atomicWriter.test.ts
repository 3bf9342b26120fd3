import { lstatSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkRelativePath, writeAtomically, type ProjectedFile } from "./atomicWriter.ts";

const root = mkdtempSync(join(tmpdir(), "plb-atomic-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const files = (o: Record<string, string>, mode = 0o644) =>
  new Map<string, ProjectedFile>(Object.entries(o).map(([k, v]) => [k, { content: Buffer.from(v), mode }]));

describe("writeAtomically", () => {
  it("lays files out behind ..data, each top-level name a symlink through it", () => {
    const dir = join(root, "a");
    expect(writeAtomically(dir, files({ "app.conf": "x=1", "nested/deep.txt": "d" }))).toBe(true);
    expect(readFileSync(join(dir, "app.conf"), "utf8")).toBe("x=1");
    expect(readFileSync(join(dir, "nested/deep.txt"), "utf8")).toBe("d");
    expect(readlinkSync(join(dir, "app.conf"))).toBe("..data/app.conf");
    expect(lstatSync(join(dir, "..data")).isSymbolicLink()).toBe(true);
    expect(lstatSync(join(dir, "..data", "app.conf")).mode & 0o777).toBe(0o644);
  });

  it("writes nothing when the contents are the same, and swaps the whole set when they change", () => {
    const dir = join(root, "b");
    writeAtomically(dir, files({ one: "1", two: "2" }));
    const first = readlinkSync(join(dir, "..data"));
    expect(writeAtomically(dir, files({ one: "1", two: "2" }))).toBe(false);
    expect(writeAtomically(dir, files({ one: "1b" }, 0o400))).toBe(true);
    expect(readlinkSync(join(dir, "..data"))).not.toBe(first);
    expect(readFileSync(join(dir, "one"), "utf8")).toBe("1b");
    expect(lstatSync(join(dir, "..data", "one")).mode & 0o777).toBe(0o400);
    // The old set and the name no longer projected are gone.
    expect(readdirSync(dir).sort()).toEqual(["..data", readlinkSync(join(dir, "..data")), "one"].sort());
  });

  it("refuses paths that leave the volume", () => {
    for (const bad of ["/abs", "../up", "a/../../b", "..hidden", ""])
      expect(() => checkRelativePath(bad)).toThrow(/invalid path/);
    expect(() => writeAtomically(join(root, "c"), files({ "../x": "1" }))).toThrow(/invalid path/);
  });
});
