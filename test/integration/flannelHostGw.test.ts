// Real flanneld (the release core deploys, built by the bootstrap) in kube-subnet-mgr mode with the
// host-gw backend on three lab nodes, against the run's control plane, whose controller-manager
// gives each Node its podCIDR. flanneld gets exactly what core's Flannel component renders for the
// lab platform (recorded through Pulumi's mocks): its ClusterRole, bound to its ServiceAccount and
// the only credentials it has; net-conf.json; the container's args and env; and, on each node, a Pod
// from the DaemonSet's template, through which flanneld learns its node (POD_NAME, POD_NAMESPACE).
//
//   net: bridge "nodes" ── node1 192.168.100.11 ── cni0 ── pod1
//                      ├── node2 192.168.100.12
//                      └── node3 192.168.100.13 ── cni0 ── pod3
import {
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1EnvVar,
  type V1ObjectMeta,
  type V1PodSpec,
  type V1PolicyRule,
} from "@kubernetes/client-node";
import { FLANNEL_VERSION, Flannel } from "@portable-lb/core";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { FlannelNode, hostAddress } from "../harness/netns/flannelNode.ts";
import { httpHistogram, startHttpEcho } from "../harness/netns/httpClient.ts";
import { addressOf, execCommand, type LabNamespace, NetnsLab, waitUntil } from "@portable-lb/lab";
import { settle } from "../harness/settle.ts";
import { testKubeConfig } from "../harness/testEnv.ts";
import { installMocks, settled } from "../unit/pulumiMocks.ts";

// The run's control plane hands out node podCIDRs from this network (jestGlobalSetup.ts).
const POD_CIDR = "10.244.0.0/16";
const NS = `flannel-hostgw-${process.pid}`;
const NODE_COUNT = 3;
const nodeName = (n: number) => `${NS}-n${n}`;
const nodeIp = (n: number) => `192.168.100.${10 + n}`;
const ECHO_PORT = 8080;
// What the DaemonSet controller adds to every daemon pod: these nodes have no kubelet, so they turn
// unreachable, and a daemon pod stays on them.
const DAEMON_POD_TOLERATIONS = ["not-ready", "unreachable"].map((t) => ({
  key: `node.kubernetes.io/${t}`,
  operator: "Exists",
  effect: "NoExecute",
}));

const adminKc = testKubeConfig();
const core = adminKc.makeApiClient(CoreV1Api);
const rbac = adminKc.makeApiClient(RbacAuthorizationV1Api);

interface LabNode {
  name: string;
  ip: string;
  ns: LabNamespace;
  podCidr: string;
  flannel: FlannelNode;
}

interface Pod {
  ns: LabNamespace;
  ip: string;
}

let lab: NetnsLab | undefined;
const nodes: LabNode[] = [];
let pod1: Pod;
let pod3: Pod;

/** The Flannel component as the engine would create it on the lab platform (the mocks record its inputs). */
async function renderFlannel() {
  const recorded = installMocks();
  const flannel = new Flannel("net", { platform: "lab", podCidr: POD_CIDR });
  await settled();
  const inputs = (type: string) => recorded.find((r) => r.type === type)!.inputs;
  const template = inputs("kubernetes:apps/v1:DaemonSet").spec.template;
  return {
    backend: flannel.backend,
    namespaceLabels: inputs("kubernetes:core/v1:Namespace").metadata.labels as Record<string, string>,
    serviceAccount: inputs("kubernetes:core/v1:ServiceAccount").metadata.name as string,
    rules: inputs("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").rules as V1PolicyRule[],
    netConf: inputs("kubernetes:core/v1:ConfigMap").data["net-conf.json"] as string,
    podMetadata: template.metadata as V1ObjectMeta,
    podSpec: template.spec as V1PodSpec,
  };
}

/** The container's env as the kubelet resolves it for the pod `name` in NS (flanneld's are fieldRefs and values). */
function containerEnv(env: V1EnvVar[], name: string): Record<string, string> {
  const fields: Record<string, string> = { "metadata.name": name, "metadata.namespace": NS };
  return Object.fromEntries(
    env.map((e) => {
      const value = e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath ?? ""];
      if (value === undefined) throw new Error(`env ${e.name}: no value for ${JSON.stringify(e.valueFrom)}`);
      return [e.name, value];
    }),
  );
}

/** A kubeconfig for the ServiceAccount: a short-lived token from the TokenRequest API, as a pod would get. */
async function serviceAccountKubeconfig(file: string, serviceAccount: string): Promise<void> {
  const request = await core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace: NS,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = adminKc.getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: serviceAccount, token: request.status!.token }],
    contexts: [{ name: serviceAccount, cluster: cluster.name, user: serviceAccount }],
    currentContext: serviceAccount,
  });
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
}

/** A pod namespace on the node's pod bridge, set up as flannel's CNI plugin would from the subnet file. */
async function startPod(node: LabNode, name: string): Promise<Pod> {
  const gateway = node.flannel.subnetEnv().subnet;
  const bridge = await lab!.bridge(node.ns, "cni0", gateway);
  const ns = await lab!.namespace(name);
  const address = hostAddress(node.podCidr, 2);
  await lab!.attach(bridge, ns, address, "eth0");
  await ns.defaultRoute(addressOf(gateway));
  await startHttpEcho(ns, { port: ECHO_PORT, name });
  return { ns, ip: addressOf(address) };
}

/** Each other node's podCIDR through that node's address: what host-gw must program on `node`. */
function hostGwRoutes(node: LabNode, among: LabNode[] = nodes): Record<string, string> {
  return Object.fromEntries(among.filter((o) => o !== node).map((o) => [o.podCidr, o.ip]));
}

async function expectRoutes(node: LabNode, want: Record<string, string>): Promise<void> {
  await waitUntil(async () => isDeepStrictEqual(await node.flannel.gatewayRoutes(), want), 20_000, 200);
  expect(await node.flannel.gatewayRoutes()).toEqual(want);
}

/** Who the HTTP echo at `url` saw as the client, for 5 new connections from `from`. */
async function clientsSeen(from: Pod, url: string): Promise<Record<string, number>> {
  const h = await httpHistogram(from.ns, url, { count: 5, by: "client" });
  expect(h.errors).toEqual({});
  return h.counts;
}

/** pod1 reaches pod3 by ping and by HTTP, with its own address (pod traffic is never masqueraded). */
async function expectPodTraffic(): Promise<void> {
  await pod1.ns.run("ping", ["-c", "2", "-i", "0.2", "-W", "2", pod3.ip], { timeoutMs: 10_000 });
  expect(await clientsSeen(pod1, `http://${pod3.ip}:${ECHO_PORT}/`)).toEqual({ [pod1.ip]: 5 });
}

/** Stops flanneld, removes the lab and the API objects; idempotent, so the last test and afterAll share it. */
async function teardown(): Promise<void> {
  for (const node of nodes) await node.flannel.close();
  await lab?.destroy();
  const names = Array.from({ length: NODE_COUNT }, (_, i) => nodeName(i + 1));
  await Promise.all([
    ...names.map((name) => core.deleteNode({ name }).catch(() => undefined)),
    rbac.deleteClusterRoleBinding({ name: NS }).catch(() => undefined),
    rbac.deleteClusterRole({ name: NS }).catch(() => undefined),
    core.deleteNamespace({ name: NS }).catch(() => undefined),
  ]);
}

beforeAll(async () => {
  const rendered = await renderFlannel();
  expect(rendered.backend).toBe("host-gw");
  lab = await NetnsLab.create("flannel");

  // flannel's namespace, ServiceAccount and RBAC, under this run's names (the e2e test deploys the real ones).
  await core.createNamespace({ body: { metadata: { name: NS, labels: rendered.namespaceLabels } } });
  await core.createNamespacedServiceAccount({
    namespace: NS,
    body: { metadata: { name: rendered.serviceAccount } },
  });
  await rbac.createClusterRole({ body: { metadata: { name: NS }, rules: rendered.rules } });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: NS },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: NS },
      subjects: [{ kind: "ServiceAccount", name: rendered.serviceAccount, namespace: NS }],
    },
  });
  const kubeconfig = join(lab.dir, "flannel.kubeconfig");
  await serviceAccountKubeconfig(kubeconfig, rendered.serviceAccount);
  const netConf = join(lab.dir, "net-conf.json");
  writeFileSync(netConf, rendered.netConf);

  const nodeNet = await lab.bridge(await lab.namespace("net"), "nodes");
  const container = rendered.podSpec.containers[0]!;
  for (let n = 1; n <= NODE_COUNT; n++) {
    const name = nodeName(n);
    const ip = nodeIp(n);
    // What a kubelet registers: the Node with its labels, then its address in the status.
    await core.createNode({
      body: { metadata: { name, labels: { "kubernetes.io/os": "linux", "kubernetes.io/hostname": name } } },
    });
    await core.patchNodeStatus(
      {
        name,
        body: {
          status: {
            addresses: [
              { type: "InternalIP", address: ip },
              { type: "Hostname", address: name },
            ],
          },
        },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const podName = `kube-flannel-ds-n${n}`;
    await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { ...rendered.podMetadata, name: podName },
        spec: {
          ...rendered.podSpec,
          nodeName: name,
          tolerations: [...(rendered.podSpec.tolerations ?? []), ...DAEMON_POD_TOLERATIONS],
        },
      },
    });
    const ns = await lab.namespace(`node${n}`, { forwarding: true });
    const uplink = await lab.attach(nodeNet, ns, `${ip}/24`, "eth0");
    let podCidr: string | undefined;
    await settle(async () => (podCidr = (await core.readNode({ name })).spec?.podCIDR) !== undefined);
    const flannel = await FlannelNode.create({
      ns,
      uplink: uplink.name,
      kubeconfig,
      netConf,
      args: container.args ?? [],
      env: containerEnv(container.env ?? [], podName),
      dir: lab.dir,
    });
    nodes.push({ name, ip, ns, podCidr: podCidr!, flannel });
  }
  for (const node of nodes) await node.flannel.start();
  pod1 = await startPod(nodes[0]!, "pod1");
  pod3 = await startPod(nodes[2]!, "pod3");
  // node3's own (host network) HTTP echo, outside the pod network.
  await startHttpEcho(nodes[2]!.ns, { port: ECHO_PORT, name: "node3" });
});

afterAll(teardown);

describe("flanneld, kube-subnet-mgr and host-gw, with core's rendered configuration on three lab nodes", () => {
  it("is the release core deploys, and takes each node's podCIDR as its subnet", async () => {
    expect((await execCommand("flanneld", ["--version"])).stderr.trim()).toBe(FLANNEL_VERSION);
    for (const node of nodes) {
      expect(node.flannel.subnetEnv()).toEqual({
        network: POD_CIDR,
        subnet: hostAddress(node.podCidr, 1),
        mtu: 1500,
        ipMasq: true,
      });
      // Written through nodes/status with the ServiceAccount's token: the ClusterRole suffices.
      const { metadata, status } = await core.readNode({ name: node.name });
      expect(metadata?.annotations).toMatchObject({
        "flannel.alpha.coreos.com/kube-subnet-manager": "true",
        "flannel.alpha.coreos.com/backend-type": "host-gw",
        "flannel.alpha.coreos.com/public-ip": node.ip,
      });
      expect(status?.conditions).toContainEqual(
        expect.objectContaining({ type: "NetworkUnavailable", status: "False", reason: "FlannelIsUp" }),
      );
    }
  });

  it("routes every other node's podCIDR through that node's address", async () => {
    for (const node of nodes) await expectRoutes(node, hostGwRoutes(node));
  });

  it("carries pod traffic between nodes, and masquerades pod traffic leaving the pod network", async () => {
    await expectPodTraffic();
    // To node3's own address: --ip-masq rewrites the source to node1's.
    expect(await clientsSeen(pod1, `http://${nodes[2]!.ip}:${ECHO_PORT}/`)).toEqual({ [nodes[0]!.ip]: 5 });
  });

  it("keeps a node's routes while its flanneld is down, and puts back a lost one when it restarts", async () => {
    const [node1, , node3] = nodes as [LabNode, LabNode, LabNode];
    const crashed = node1.flannel.process!;
    process.kill(crashed.pid, "SIGKILL");
    await settle(() => !crashed.running(), 5_000);
    expect(await node1.flannel.gatewayRoutes()).toEqual(hostGwRoutes(node1));
    await expectPodTraffic();

    await node1.ns.ip("route", "del", node3.podCidr);
    await node1.flannel.start();
    await expectRoutes(node1, hostGwRoutes(node1));
    expect(node1.flannel.subnetEnv().subnet).toBe(hostAddress(node1.podCidr, 1));
    await expectPodTraffic();
  });

  it("takes a deleted node's subnet out of the other nodes' routes", async () => {
    const [node1, node2, node3] = nodes as [LabNode, LabNode, LabNode];
    // The node is decommissioned: its flanneld stops first, which leaves everyone's routes alone.
    await node2.flannel.process!.stop();
    expect(await node1.flannel.gatewayRoutes()).toEqual(hostGwRoutes(node1));
    await core.deleteNode({ name: node2.name });
    await expectRoutes(node1, hostGwRoutes(node1, [node1, node3]));
    await expectRoutes(node3, hostGwRoutes(node3, [node1, node3]));
    await expectPodTraffic();
  });

  it("leaves no flanneld, namespace or API object behind", async () => {
    const processes = nodes.map((n) => n.flannel.process!);
    await teardown();
    expect(processes.filter((p) => p.running())).toEqual([]);
    expect((await execCommand("ip", ["netns", "list"])).stdout).not.toContain(`${lab!.id}-`);
    expect(existsSync(lab!.stateFile)).toBe(false);
    const gone = async (read: () => Promise<unknown>) =>
      read().then(
        () => false,
        (err: { code?: number }) => err.code === 404,
      );
    for (const node of nodes) expect(await gone(() => core.readNode({ name: node.name }))).toBe(true);
    expect(await gone(() => rbac.readClusterRole({ name: NS }))).toBe(true);
    expect(await gone(() => rbac.readClusterRoleBinding({ name: NS }))).toBe(true);
  });
});
