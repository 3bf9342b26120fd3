import type { V1NodeCondition } from "@kubernetes/client-node";
import { goArch, nodeConditions, nodeLabels, nodeStatusBase } from "./nodeRegistration.ts";

const id = {
  nodeName: "node1",
  nodeIp: "192.168.100.11",
  labels: { zone: "a", "kubernetes.io/os": "windows" },
  taints: [],
  capacity: { cpu: "2", memory: "4Gi", pods: "110" },
};

describe("Node object", () => {
  it("carries the kubelet's labels, which extra labels cannot override", () => {
    expect(nodeLabels(id)).toEqual({
      zone: "a",
      "kubernetes.io/hostname": "node1",
      "kubernetes.io/os": "linux",
      "kubernetes.io/arch": goArch(),
    });
    expect(goArch("x64")).toBe("amd64");
  });

  it("reports the InternalIP, capacity and allocatable", () => {
    const s = nodeStatusBase(id, "v1.36.1");
    expect(s.addresses).toEqual([
      { type: "InternalIP", address: "192.168.100.11" },
      { type: "Hostname", address: "node1" },
    ]);
    expect(s.capacity).toMatchObject({ cpu: "2", memory: "4Gi", pods: "110" });
    expect(s.allocatable).toEqual(s.capacity);
    expect(s.nodeInfo).toMatchObject({ kubeletVersion: "v1.36.1", operatingSystem: "linux" });
  });

  it("heartbeats every condition, keeping transition times while the status stays", () => {
    const ready = { ready: true, reason: "KubeletReady", message: "ok" };
    const first = nodeConditions(ready, [], "2026-01-01T00:00:00Z");
    expect(first.map((c) => `${c.type}=${c.status}`)).toEqual([
      "MemoryPressure=False",
      "DiskPressure=False",
      "PIDPressure=False",
      "Ready=True",
    ]);
    const later = nodeConditions(ready, first, "2026-01-01T00:00:10Z");
    const r = later.find((c) => c.type === "Ready") as V1NodeCondition & {
      lastHeartbeatTime: string;
      lastTransitionTime: string;
    };
    expect(r.lastHeartbeatTime).toBe("2026-01-01T00:00:10Z");
    expect(r.lastTransitionTime).toBe("2026-01-01T00:00:00Z");
    const down = nodeConditions(
      { ready: false, reason: "KubeletNotReady", message: "stopped" },
      later,
      "2026-01-01T00:00:20Z",
    );
    expect(down.find((c) => c.type === "Ready")).toMatchObject({
      status: "False",
      lastTransitionTime: "2026-01-01T00:00:20Z",
    });
  });
});
