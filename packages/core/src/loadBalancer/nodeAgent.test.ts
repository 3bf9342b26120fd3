import { installMocks, settled, typeChain } from "../../../../test/unit/pulumiMocks.ts";
import { lbConfigSchema } from "../config/lbConfig.ts";
import { minimalSecurityContext } from "../containerSecurity.ts";
import { NodeAgent, type NodeAgentArgs } from "./nodeAgent.ts";

const recorded = installMocks();
beforeEach(() => (recorded.length = 0));

const args: NodeAgentArgs = {
  namespace: "lb-ns",
  config: lbConfigSchema.parse({
    routingMode: "bgp",
    podCidr: "10.244.0.0/16",
    vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
    bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
  }),
  configMapName: "lb-config",
  podAnnotations: { "portable-lb.io/config-hash": "abc" },
  image: "registry.example/portable-lb:1",
  nodeSelector: { "portable-lb.io/load-balancer": "true" },
  priorityClassName: "portable-lb-dataplane",
};

const byType = (type: string) => recorded.filter((r) => r.type.endsWith(type)).map((r) => r.inputs);

describe("NodeAgent", () => {
  it("may only read Pods, in the LB namespace only", async () => {
    const agent = new NodeAgent("agent", args);
    await settled();
    expect(byType(":ClusterRole")).toEqual([]);
    expect(byType(":ClusterRoleBinding")).toEqual([]);
    const [role] = byType(":Role");
    expect(role).toMatchObject({ metadata: { name: "portable-lb-node-agent", namespace: "lb-ns" } });
    expect(role!.rules).toEqual([{ apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] }]);
    const [binding] = byType(":RoleBinding");
    expect(binding!.metadata.namespace).toBe("lb-ns");
    expect(binding!.roleRef).toEqual({
      apiGroup: "rbac.authorization.k8s.io",
      kind: "Role",
      name: "portable-lb-node-agent",
    });
    expect(binding!.subjects).toEqual([
      { kind: "ServiceAccount", name: "portable-lb-node-agent", namespace: "lb-ns" },
    ]);
    for (const r of [agent.serviceAccount, agent.role, agent.daemonSet])
      expect(await typeChain(r)).toMatch(/^portable-lb:core:NodeAgent\$kubernetes:/);
  });

  it("runs in the node's network namespace with NET_ADMIN only, never privileged", async () => {
    new NodeAgent("agent", args);
    await settled();
    const [ds] = byType(":DaemonSet");
    const pod = ds!.spec.template.spec;
    expect(pod).toMatchObject({
      hostNetwork: true,
      dnsPolicy: "ClusterFirstWithHostNet",
      serviceAccountName: "portable-lb-node-agent",
      nodeSelector: args.nodeSelector,
      priorityClassName: "portable-lb-dataplane",
    });
    // Nothing else of the host: no PID/IPC namespace, no host paths.
    expect(pod.hostPID).toBeUndefined();
    expect(pod.hostIPC).toBeUndefined();
    expect(pod.volumes).toEqual([{ name: "config", configMap: { name: "lb-config" } }]);
    expect(pod.containers).toHaveLength(1);
    const [c] = pod.containers;
    expect(c.securityContext).toEqual(minimalSecurityContext(["NET_ADMIN"]));
    expect(c.securityContext).toMatchObject({
      privileged: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] },
    });
    expect(c.image).toBe(args.image);
    expect(c.command).toEqual(["portable-lb-node-agent", "--config", "/etc/portable-lb/config.json"]);
    expect(c.env).toEqual([
      { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
      { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
    ]);
    expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz", port: 9152 });
    expect(c.readinessProbe.httpGet).toEqual({ path: "/readyz", port: 9152 });
    expect(ds!.spec.template.metadata.annotations).toEqual(args.podAnnotations);
    expect(ds!.spec.selector.matchLabels).toEqual({ app: "portable-lb-node-agent" });
    expect(ds!.metadata.annotations).toBeUndefined();
  });

  it("with DSR: runs on every node, reads Services, EndpointSlices and NetworkPolicies, tells Services, enters pod namespaces, never privileged", async () => {
    new NodeAgent("agent", { ...args, dsr: { netnsDir: "/run/containerd/netns" } });
    await settled();
    const [clusterRole] = byType(":ClusterRole");
    expect(clusterRole).toMatchObject({ metadata: { name: "portable-lb-node-agent" } });
    expect(clusterRole!.rules).toEqual([
      { apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    ]);
    const [binding] = byType(":ClusterRoleBinding");
    expect(binding!.roleRef).toMatchObject({ kind: "ClusterRole", name: "portable-lb-node-agent" });
    expect(binding!.subjects).toEqual([
      { kind: "ServiceAccount", name: "portable-lb-node-agent", namespace: "lb-ns" },
    ]);
    // The namespaced Role stays as it was.
    expect(byType(":Role")[0]!.rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
    ]);
    const pod = byType(":DaemonSet")[0]!.spec.template.spec;
    // Backends may run on any node.
    expect(pod.nodeSelector).toBeUndefined();
    const [c] = pod.containers;
    // setns into a pod's network namespace needs CAP_SYS_ADMIN; nothing else is added.
    expect(c.securityContext).toEqual(minimalSecurityContext(["NET_ADMIN", "SYS_ADMIN"]));
    expect(c.securityContext.privileged).toBe(false);
    expect(c.env).toContainEqual({ name: "DSR_NETNS_DIR", value: "/run/containerd/netns" });
    expect(pod.volumes).toEqual([
      { name: "config", configMap: { name: "lb-config" } },
      { name: "pod-netns", hostPath: { path: "/run/containerd/netns", type: "DirectoryOrCreate" } },
      { name: "proc-sys-net", hostPath: { path: "/proc/sys/net", type: "Directory" } },
    ]);
    expect(c.volumeMounts).toEqual([
      { name: "config", mountPath: "/etc/portable-lb", readOnly: true },
      // Read-only, and pods started later appear in it.
      {
        name: "pod-netns",
        mountPath: "/run/containerd/netns",
        readOnly: true,
        mountPropagation: "HostToContainer",
      },
      // Writable, outside the container's /proc (read-only, and AppArmor-guarded).
      { name: "proc-sys-net", mountPath: "/host/proc/sys/net" },
    ]);
    expect(pod.hostPID).toBeUndefined();
  });

  it("with DSR on the IPVS engine: also keeps its node's IPIP Lease, in the LB namespace only", async () => {
    const ipvs = lbConfigSchema.parse({ ...args.config, dataPlane: { mode: "dsr", engine: "ipvs" } });
    new NodeAgent("agent", { ...args, config: ipvs, dsr: { netnsDir: "/run/containerd/netns" } });
    await settled();
    expect(byType(":Role")[0]!.rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
      {
        apiGroups: ["coordination.k8s.io"],
        resources: ["leases"],
        verbs: ["get", "list", "watch", "create", "update"],
      },
    ]);
    // Nothing more cluster-wide than DSR on nftables gets.
    expect(byType(":ClusterRole")[0]!.rules).not.toContainEqual(
      expect.objectContaining({ resources: ["leases"] }),
    );
  });

  it("skips Pulumi's readiness wait only when asked (clusters without kubelets)", async () => {
    new NodeAgent("agent", { ...args, skipAwait: true });
    await settled();
    expect(byType(":DaemonSet")[0]!.metadata.annotations).toEqual({ "pulumi.com/skipAwait": "true" });
  });
});
