import { OptionsError, parseAgentOptions, parseLabels, parseTaints } from "./agentOptions.ts";

const required = [
  "--node-name",
  "n1",
  "--node-ip",
  "10.0.0.11",
  "--kubeconfig",
  "/k",
  "--state-dir",
  "/s",
  "--node-root",
  "/r",
];

describe("parseAgentOptions", () => {
  it("reads flags, with defaults for the rest", () => {
    const o = parseAgentOptions(
      [...required, "--node-labels", "zone=a,portable-lb.io/load-balancer=true"],
      {},
    );
    expect(o).toMatchObject({
      nodeName: "n1",
      nodeIp: "10.0.0.11",
      kubeconfig: "/k",
      podBridge: "cni0",
      stateDir: "/s",
      nodeRoot: "/r",
      nodeLabels: { zone: "a", "portable-lb.io/load-balancer": "true" },
      keepNode: false,
      logLevel: "info",
    });
    expect(o.capacity.pods).toBe("110");
    expect(o.capacity.cpu).toMatch(/^[0-9]+$/);
    expect(o.capacity.memory).toMatch(/^[0-9]+Ki$/);
  });

  it("falls back to environment variables (KUBECONFIG for the kubeconfig), flags winning", () => {
    const o = parseAgentOptions(["--node-ip", "10.0.0.12"], {
      LAB_AGENT_NODE_NAME: "n2",
      LAB_AGENT_NODE_IP: "10.0.0.99",
      KUBECONFIG: "/kc",
      LAB_AGENT_STATE_DIR: "/state",
      LAB_AGENT_NODE_ROOT: "/root2",
      LAB_AGENT_POD_BRIDGE: "br-pods",
      LAB_AGENT_CPU: "2",
      LAB_AGENT_MEMORY: "4Gi",
      LAB_AGENT_KEEP_NODE: "true",
    });
    expect(o).toMatchObject({
      nodeName: "n2",
      nodeIp: "10.0.0.12",
      kubeconfig: "/kc",
      podBridge: "br-pods",
      keepNode: true,
    });
    expect(o.capacity).toEqual({ cpu: "2", memory: "4Gi", pods: "110" });
  });

  it("names the flag to fix", () => {
    expect(() => parseAgentOptions([], {})).toThrow(/--node-name \(or LAB_AGENT_NODE_NAME\) is required/);
    expect(() => parseAgentOptions([...required.slice(2), "--node-name", "Node_1"], {})).toThrow(
      /--node-name: "Node_1"/,
    );
    expect(() => parseAgentOptions([...required, "--node-ip", "10.0.0.300"], {})).toThrow(/--node-ip/);
    expect(() => parseAgentOptions([...required, "--memory", "lots"], {})).toThrow(
      /--memory: "lots" is not a quantity/,
    );
    expect(() => parseAgentOptions([...required, "--pod-bridge", "a-very-long-bridge"], {})).toThrow(
      /--pod-bridge/,
    );
    expect(() => parseAgentOptions([...required, "--log-level", "loud"], {})).toThrow(/--log-level: "loud"/);
    expect(() => parseAgentOptions([...required, "--nope"], {})).toThrow(OptionsError);
  });
});

describe("parseLabels", () => {
  it("accepts Kubernetes label syntax and refuses the rest", () => {
    expect(parseLabels("a=1, example.com/b=x_y.z,c=")).toEqual({ a: "1", "example.com/b": "x_y.z", c: "" });
    expect(() => parseLabels("novalue")).toThrow(/novalue/);
    expect(() => parseLabels("a=b c")).toThrow(/not a valid label/);
  });
});

describe("parseTaints", () => {
  it("reads kubelet --register-with-taints syntax", () => {
    expect(parseTaints("a=b:NoSchedule, example.com/c:NoExecute")).toEqual([
      { key: "a", value: "b", effect: "NoSchedule" },
      { key: "example.com/c", effect: "NoExecute" },
    ]);
    expect(() => parseTaints("a=b")).toThrow(/not a taint/);
    expect(() => parseTaints("a=b:Sometimes")).toThrow(/not a taint/);
  });
});
