import { cpuByGroup, formatGroups, processGroup } from "./idleCpu.ts";
import { sample } from "./testing/processSample.ts";

describe("processGroup", () => {
  it("names a process by its program, or by the script an interpreter runs", () => {
    expect(processGroup(["/usr/bin/kubelet", "--config", "/x"], "kubelet")).toBe("kubelet");
    expect(
      processGroup(["node", "/usr/local/bin/portable-lb-controller", "--config", "c.json"], "node"),
    ).toBe("portable-lb-controller");
    expect(
      processGroup(
        ["/usr/bin/node", "--max-old-space-size=64", "/usr/local/bin/portable-lb-node-agent"],
        "node",
      ),
    ).toBe("portable-lb-node-agent");
    expect(processGroup(["bird", "-f", "-c", "/run/bird.conf"], "bird")).toBe("bird");
    expect(processGroup(["sh", "-c", "sleep 1"], "sh")).toBe("sh -c");
    expect(processGroup(["node"], "node")).toBe("node");
    expect(processGroup([], "kworker/0:1")).toBe("[kworker/0:1]");
  });
});

describe("cpuByGroup", () => {
  it("sums each group's own and children's time over the window, in % of one core, most first", () => {
    const controller = ["node", "/usr/local/bin/portable-lb-controller"];
    const before = [
      sample(10, controller, [100, 50, 30, 20]),
      sample(11, controller, [200, 0, 0, 0]),
      sample(20, ["/usr/bin/kubelet"], [1000, 500, 0, 0]),
      // Gone by the end: it counts only through a parent that waited for it.
      sample(30, ["nft", "list", "table"], [5, 5, 0, 0]),
    ];
    const after = [
      sample(10, controller, [160, 70, 130, 40]),
      sample(11, controller, [220, 20, 0, 0]),
      sample(20, ["/usr/bin/kubelet"], [1030, 510, 0, 0]),
      // Started in the window: all its time counts.
      sample(40, ["/usr/bin/bird", "-f"], [6, 4, 0, 0]),
      // The pid was reused by a new process: not the one seen before.
      sample(30, ["/usr/bin/containerd"], [3, 2, 0, 0], 2000),
    ];
    const groups = cpuByGroup(before, after, 10);
    expect(groups.map((g) => g.group)).toEqual(["portable-lb-controller", "kubelet", "bird", "containerd"]);
    // (60 + 20 + 20 + 20) ticks own, (100 + 20) children's, over 10 s at 100 ticks/s.
    expect(groups[0]).toEqual({
      group: "portable-lb-controller",
      processes: 2,
      selfPct: 12,
      childrenPct: 12,
    });
    expect(groups[1]).toEqual({ group: "kubelet", processes: 1, selfPct: 4, childrenPct: 0 });
    expect(groups[2]).toEqual({ group: "bird", processes: 1, selfPct: 1, childrenPct: 0 });
    expect(groups[3]).toEqual({ group: "containerd", processes: 1, selfPct: 0.5, childrenPct: 0 });
    expect(() => cpuByGroup(before, after, 0)).toThrow(/longer than 0 s \(got 0\)/);
  });

  it("prints one line per group and the total", () => {
    const text = formatGroups(
      [
        { group: "portable-lb-controller", processes: 3, selfPct: 9.5, childrenPct: 4.25 },
        { group: "kubelet", processes: 6, selfPct: 6, childrenPct: 0 },
      ],
      60,
    );
    const lines = text.split("\n");
    expect(lines[0]).toMatch(/over 60 s, in % of one core/);
    expect(lines.slice(1).map((l) => l.split(/\s{2,}/))).toEqual([
      ["group", "processes", "own %", "children %", "total %"],
      ["portable-lb-controller", "3", "9.50", "4.25", "13.75"],
      ["kubelet", "6", "6.00", "0.00", "6.00"],
      ["total", "9", "15.50", "4.25", "19.75"],
    ]);
  });
});
