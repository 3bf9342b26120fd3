import { parseProcStat } from "./procStat.ts";

/** A stat line with `comm`, and field n (3 to 22) set to `set[n]` or to n itself. */
const line = (comm: string, set: Record<number, string> = {}) =>
  `4242 (${comm}) ${Array.from({ length: 50 }, (_, i) => set[i + 3] ?? String(i + 3)).join(" ")}\n`;

describe("parseProcStat", () => {
  it("reads identity, state, parent and CPU times, even when the command name holds ') '", () => {
    expect(parseProcStat(line("odd) (name", { 3: "S", 22: "987654" }))).toEqual({
      pid: 4242,
      comm: "odd) (name",
      state: "S",
      ppid: 4,
      utime: 14,
      stime: 15,
      cutime: 16,
      cstime: 17,
      startTime: "987654",
    });
  });

  it("refuses what is not a stat line, naming it", () => {
    expect(() => parseProcStat("4242 kubelet S 1")).toThrow(/not a \/proc\/<pid>\/stat line: 4242 kubelet/);
    expect(() => parseProcStat(line("short").slice(0, 40))).toThrow(/not a \/proc\/<pid>\/stat line/);
  });
});
