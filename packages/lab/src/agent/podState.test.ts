import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  alive,
  containerFiles,
  loadRecords,
  podDirName,
  podsRoot,
  processStart,
  saveRecord,
} from "./podState.ts";

describe("state folder", () => {
  const dir = mkdtempSync(join(tmpdir(), "plb-state-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("saves and loads pod records; a folder without one is a stray to clean up", () => {
    const podDir = join(podsRoot(dir), podDirName("shop", "web-1", "u1"));
    saveRecord(podDir, {
      uid: "u1",
      namespace: "shop",
      name: "web-1",
      hostNetwork: false,
      netns: "plb-pod-u1",
      containers: {},
    });
    mkdirSync(join(podsRoot(dir), podDirName("shop", "half", "u2")));
    const loaded = loadRecords(dir).sort((a, b) => a.record.uid.localeCompare(b.record.uid));
    expect(loaded.map((l) => [l.record.uid, l.record.netns])).toEqual([
      ["u1", "plb-pod-u1"],
      ["u2", undefined],
    ]);
    expect(containerFiles(podDir, "web").log).toBe(join(podDir, "web.log"));
  });

  it("identifies a process by pid and start time", () => {
    const me = { pid: process.pid, start: processStart(process.pid)! };
    expect(alive(me)).toBe(true);
    expect(alive({ ...me, start: "1" })).toBe(false);
    expect(processStart(2 ** 30)).toBeUndefined();
  });
});
