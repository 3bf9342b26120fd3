import { nodeLayout, NodeLayoutError } from "./nodeLayout.ts";

describe("nodeLayout", () => {
  it("keeps every path under the node's folder and names the cgroup after scope and node", () => {
    const l = nodeLayout("/var/lab/n1", "worker-1", "pl1234");
    expect(l.cgroupRoot).toBe("/portable-lb-pl1234-worker-1");
    for (const [key, value] of Object.entries(l))
      if (!["name", "cgroupRoot"].includes(key)) expect(value.startsWith("/var/lab/n1")).toBe(true);
  });

  it("refuses a node name that is not a DNS label, naming it", () => {
    expect(() => nodeLayout("/x", "Worker_1", "pl1")).toThrow(/node name 'Worker_1' must be a DNS label/);
  });

  it("refuses a folder whose containerd socket would exceed the unix socket limit", () => {
    expect(() => nodeLayout(`/${"d".repeat(100)}`, "n1", "pl1")).toThrow(NodeLayoutError);
  });
});
