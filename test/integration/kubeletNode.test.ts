// Real nodes with the run's real control plane: two lab network namespaces on a node bridge, each
// running containerd (CRI, runc), a real kubelet and kube-proxy as system:node:<name> and
// system:kube-proxy (certificates from the control plane's CA). A Deployment placed by the scheduler
// runs one pod per node from an image built here, with probes, a preStop hook and grace,
// configMap/secret/downwardAPI volumes and a least-privilege security context. The cases follow the
// pods' life: Ready and reachable across nodes, restarted by their liveness probe, stopped through
// preStop within their grace period, and at the end the nodes stopped with nothing left of them.
import { AppsV1Api, CoreV1Api, Watch, type V1Pod, type V1PodSpec } from "@kubernetes/client-node";
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import {
  cgroupPids,
  KUBELET_KERNEL_SETTINGS,
  KubeletNode,
  NetnsLab,
  nodeLayout,
  labImage,
  runs,
  waitUntil,
  writeNodeCredentials,
  type LabNamespace,
  type NodeLayout,
} from "@portable-lb/lab";
import { ApiBridge } from "../harness/netns/apiBridge.ts";
import { settle } from "../harness/settle.ts";
import { testKubeConfig, testKubeconfig } from "../harness/testEnv.ts";

const RUN = `kn${process.pid}`;
const NS = `kubelet-node-${process.pid}`;
const LABEL = "portable-lb.io/kubelet-node-test";
const CLUSTER_CIDR = "10.244.0.0/16";
const nodeName = (n: number) => `${RUN}-node${n}`;
const nodeIp = (n: number) => `192.168.78.${10 + n}`;
const GATEWAY = "192.168.78.1";
const busybox = labImage("busybox");
/** The version of the kubelet the bootstrap built ("v1.35.4"), as it reports itself. */
const kubeletVersion = () =>
  execFileSync("kubelet", ["--version"], { encoding: "utf8" }).trim().split(" ")[1];

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);

interface TestNode {
  n: number;
  ns: LabNamespace;
  bridge: ApiBridge;
  layout: NodeLayout;
  node?: KubeletNode;
  podCidr?: string;
}

let lab: NetnsLab;
const hostKernelSettings = new Map(
  Object.keys(KUBELET_KERNEL_SETTINGS).map((key) => [key, readFileSync(`/proc/sys/${key}`, "utf8")]),
);
let handoff: string;
const nodes: TestNode[] = [];

// What the container runs: shows what it sees (in its log), serves /srv/www, and on SIGTERM notes
// it in the hand-off folder and exits.
const STARTUP = [
  'echo "config=$(cat /etc/web-config/greeting) secret=$(cat /etc/web-secret/token) env=$SECRET_TOKEN"',
  'echo "pod=$(cat /etc/podinfo/name) app=$(cat /etc/podinfo/app) mem=$(cat /etc/podinfo/mem) ip=$POD_IP node=$NODE_NAME"',
  'echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"',
  "grep -E '^Cap(Eff|Bnd)' /proc/self/status | tr '\\t' ' '",
  "(touch /root-probe 2>/dev/null && echo root-writable) || echo root-readonly",
  "echo ok > /srv/www/ready",
  'echo "$POD_NAME" > /srv/www/name',
  "touch /srv/www/alive",
  "trap 'echo \"term $POD_NAME\" >> /handoff/events.log; kill $HTTPD; exit 0' TERM",
  "httpd -f -p 8080 -h /srv/www & HTTPD=$!",
  "wait",
].join("\n");

function webPodSpec(): V1PodSpec {
  return {
    nodeSelector: { [LABEL]: RUN },
    tolerations: [{ key: LABEL, operator: "Equal", value: RUN, effect: "NoExecute" }],
    // One per node: both nodes and the path between them are exercised.
    affinity: {
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: { app: "web" } }, topologyKey: "kubernetes.io/hostname" },
        ],
      },
    },
    terminationGracePeriodSeconds: 20,
    automountServiceAccountToken: false,
    securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000, runAsNonRoot: true },
    containers: [
      {
        name: "web",
        image: busybox.ref,
        imagePullPolicy: "IfNotPresent",
        command: ["/bin/sh", "-c", STARTUP],
        env: [
          { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
          { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
          { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
          { name: "SECRET_TOKEN", valueFrom: { secretKeyRef: { name: "web-secret", key: "token" } } },
        ],
        resources: { limits: { memory: "32Mi", cpu: "100m" } },
        ports: [{ name: "http", containerPort: 8080 }],
        volumeMounts: [
          { name: "config", mountPath: "/etc/web-config", readOnly: true },
          { name: "secret", mountPath: "/etc/web-secret", readOnly: true },
          { name: "podinfo", mountPath: "/etc/podinfo", readOnly: true },
          { name: "www", mountPath: "/srv/www" },
          { name: "handoff", mountPath: "/handoff" },
        ],
        readinessProbe: { httpGet: { path: "/ready", port: "http" }, periodSeconds: 1 },
        livenessProbe: {
          exec: { command: ["test", "-f", "/srv/www/alive"] },
          periodSeconds: 1,
          failureThreshold: 2,
        },
        lifecycle: {
          preStop: {
            exec: { command: ["sh", "-c", 'echo "prestop $POD_NAME" >> /handoff/events.log; sleep 2'] },
          },
        },
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] },
        },
      },
    ],
    volumes: [
      { name: "config", configMap: { name: "web-config" } },
      { name: "secret", secret: { secretName: "web-secret", defaultMode: 0o440 } },
      {
        name: "podinfo",
        downwardAPI: {
          items: [
            { path: "name", fieldRef: { fieldPath: "metadata.name" } },
            { path: "app", fieldRef: { fieldPath: "metadata.labels['app']" } },
            {
              path: "mem",
              resourceFieldRef: { containerName: "web", resource: "limits.memory", divisor: "1Mi" },
            },
          ],
        },
      },
      { name: "www", emptyDir: {} },
      { name: "handoff", hostPath: { path: handoff, type: "Directory" } },
    ],
  };
}

async function webPods(): Promise<V1Pod[]> {
  return (await core.listNamespacedPod({ namespace: NS, labelSelector: "app=web" })).items;
}

const isReady = (p: V1Pod) =>
  p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
const nodeOf = (p: V1Pod) => nodes.find((x) => nodeName(x.n) === p.spec?.nodeName)!;

/** The container's log, as the kubelet's CRI runtime wrote it (the API server cannot reach the nodes). */
function containerLog(p: V1Pod, restart = 0): string {
  const dir = join(nodeOf(p).layout.podLogs, `${NS}_${p.metadata!.name!}_${p.metadata!.uid!}`, "web");
  return readFileSync(join(dir, `${restart}.log`), "utf8");
}

/** Mount points of the node's own mount namespace (its kubelet's view). */
function nodeMounts(t: TestNode): string[] {
  const kubelet = t.node!.processes.find((p) => p.name === "kubelet")!;
  return readFileSync(`/proc/${kubelet.pid}/mountinfo`, "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "");
}

beforeAll(async () => {
  lab = await NetnsLab.create("kubelet");
  handoff = join(lab.dir, "handoff");
  mkdirSync(handoff);
  chmodSync(handoff, 0o777); // written by the pods' non-root user
  const pause = labImage("pause");
  const images = [pause.archive, busybox.archive];
  const lan = await lab.namespace("lan");
  // The node network's gateway: nodes route what is not theirs (Service addresses too) there.
  const nodeNet = await lab.bridge(lan, "nodes", `${GATEWAY}/24`);
  const pkiDir = join(dirname(testKubeconfig()), "pki");
  for (const n of [1, 2]) {
    const ns = await lab.namespace(`node${n}`, { forwarding: true });
    await lab.attach(nodeNet, ns, `${nodeIp(n)}/24`, "eth0");
    await ns.defaultRoute(GATEWAY);
    const bridge = await ApiBridge.open(ns, testKubeconfig());
    const layout = nodeLayout(join(lab.dir, `node${n}`), nodeName(n), lab.id);
    mkdirSync(layout.dir, { recursive: true });
    await writeNodeCredentials({ layout, pkiDir, server: bridge.server });
    nodes.push({ n, ns, bridge, layout });
  }
  for (const t of nodes) {
    t.node = await KubeletNode.start({
      layout: t.layout,
      netns: t.ns.netns,
      nodeIp: nodeIp(t.n),
      clientCaFile: join(pkiDir, "ca.crt"),
      clusterCidr: CLUSTER_CIDR,
      images,
      sandboxImage: pause.ref,
      labels: { [LABEL]: RUN },
      taints: [{ key: LABEL, value: RUN, effect: "NoExecute" }],
    });
  }
}, 300_000);

afterAll(async () => {
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
  for (const t of nodes) await t.node?.stop();
  for (const n of [1, 2]) await core.deleteNode({ name: nodeName(n) }).catch(() => undefined);
  await Promise.all(nodes.map((t) => t.bridge.close()));
  await lab?.destroy();
}, 120_000);

describe("real lab nodes: containerd, runc, the kubelet and kube-proxy", () => {
  it("registers each node Ready, as itself, with its address, pod CIDR, runtime and kube-proxy's rules", async () => {
    for (const t of nodes) {
      await settle(async () => {
        const n = await core.readNode({ name: nodeName(t.n) }).catch(() => undefined);
        t.podCidr = n?.spec?.podCIDR;
        // Ready, and the node lifecycle controller has taken its not-ready taint away.
        return (
          n?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true &&
          n.spec?.taints?.every((taint) => taint.key === LABEL) === true
        );
      }, 120_000);
      const n = await core.readNode({ name: nodeName(t.n) });
      expect(n.status?.addresses).toContainEqual({ type: "InternalIP", address: nodeIp(t.n) });
      expect(n.status?.nodeInfo).toMatchObject({
        kubeletVersion: kubeletVersion(),
        containerRuntimeVersion: expect.stringMatching(/^containerd:\/\/1\.6\./),
      });
      expect(n.spec?.taints).toEqual([{ key: LABEL, value: RUN, effect: "NoExecute" }]);
      expect(t.podCidr).toMatch(/^10\.244\.\d+\.0\/24$/);
      // kube-proxy programs its nftables table in the node's namespace, not the machine's.
      await settle(
        async () => (await t.ns.exec("nft", ["list", "table", "ip", "kube-proxy"])).code === 0,
        30_000,
      );
      expect(t.node!.running()).toBe(true);
      // The kubelet sees the kernel settings it insists on; the machine keeps its own.
      const kubelet = t.node!.processes.find((p) => p.name === "kubelet")!;
      for (const [key, value] of Object.entries(KUBELET_KERNEL_SETTINGS)) {
        expect(readFileSync(`/proc/${kubelet.pid}/root/proc/sys/${key}`, "utf8").trim()).toBe(value);
        expect(readFileSync(`/proc/sys/${key}`, "utf8")).toBe(hostKernelSettings.get(key));
      }
    }
    const [a, b] = nodes as [TestNode, TestNode];
    // host-gw by hand: each node reaches the other's pods through it.
    await a.ns.route(b.podCidr!, nodeIp(b.n));
    await b.ns.route(a.podCidr!, nodeIp(a.n));
  }, 180_000);

  it("runs the pods Ready from the local image, with their volumes, env and security context", async () => {
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await core.createNamespacedConfigMap({
      namespace: NS,
      body: { metadata: { name: "web-config" }, data: { greeting: "hello" } },
    });
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "web-secret" }, stringData: { token: "s3cret" } },
    });
    await settle(
      async () =>
        (await core
          .readNamespacedServiceAccount({ name: "default", namespace: NS })
          .catch(() => undefined)) !== undefined,
    );
    await apps.createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name: "web" },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: "web" } },
          template: { metadata: { labels: { app: "web" } }, spec: webPodSpec() },
        },
      },
    });
    await settle(async () => {
      const pods = await webPods();
      return pods.length === 2 && pods.every(isReady);
    }, 120_000);
    const pods = await webPods();
    expect(new Set(pods.map((p) => p.spec?.nodeName))).toEqual(new Set([nodeName(1), nodeName(2)]));
    for (const p of pods) {
      const t = nodeOf(p);
      const log = containerLog(p);
      expect(log).toContain("config=hello secret=s3cret env=s3cret");
      expect(log).toContain(
        `pod=${p.metadata!.name} app=web mem=32 ip=${p.status!.podIP} node=${nodeName(t.n)}`,
      );
      expect(log).toContain("uid=1000 gid=1000 groups=1000 2000");
      // Every capability dropped but NET_BIND_SERVICE (bit 10); none effective for a non-root user.
      expect(log).toContain("CapEff: 0000000000000000");
      expect(log).toContain("CapBnd: 0000000000000400");
      expect(log).toContain("root-readonly");
      // In the node's pod CIDR (t.podCidr is x.y.z.0/24), and served to the other node through it.
      expect(p.status!.podIP!.split(".").slice(0, 3)).toEqual(t.podCidr!.split(".").slice(0, 3));
      const other = nodes.find((x) => x !== t)!;
      const r = await other.ns.exec("curl", [
        "-sS",
        "--noproxy",
        "*",
        "--max-time",
        "5",
        `http://${p.status!.podIP}:8080/ready`,
      ]);
      expect(r).toMatchObject({ code: 0, stdout: "ok\n" });
      // The kubelet links the container's log in the node's own /var/log, not the machine's.
      const links = readdirSync(join(t.layout.varLog, "containers"));
      expect(links.some((l) => l.startsWith(`${p.metadata!.name}_${NS}_web-`))).toBe(true);
      const hostLinks = existsSync("/var/log/containers") ? readdirSync("/var/log/containers") : [];
      expect(hostLinks.filter((l) => l.includes(NS))).toEqual([]);
      // The container's processes run under the node's cgroup root, nowhere else.
      expect(cgroupPids(t.layout.cgroupRoot).length).toBeGreaterThan(0);
    }
  }, 180_000);

  it("serves a ClusterIP Service from both nodes' pods through kube-proxy's nftables rules", async () => {
    const svc = await core.createNamespacedService({
      namespace: NS,
      body: {
        metadata: { name: "web" },
        spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: "http" }] },
      },
    });
    const url = `http://${svc.spec!.clusterIP!}/name`;
    const names = new Set((await webPods()).map((p) => p.metadata!.name!));
    // From either node, the Service answers, and kube-proxy spreads the requests over both pods.
    for (const t of nodes) {
      const answered = new Set<string>();
      let error = "";
      const ok = await waitUntil(
        async () => {
          const r = await t.ns.exec("curl", ["-sS", "--noproxy", "*", "--max-time", "2", url]);
          if (r.code === 0) answered.add(r.stdout.trim());
          else error = r.stderr.trim();
          return answered.size === names.size;
        },
        30_000,
        100,
      );
      expect({ answered: [...answered].sort(), error: ok ? "" : error }).toEqual({
        answered: [...names].sort(),
        error: "",
      });
    }
  }, 90_000);

  it("restarts a container whose liveness probe fails, through the CRI's exec", async () => {
    const [p] = await webPods();
    const t = nodeOf(p!);
    // The emptyDir is a folder on the node's disk: take away what the probe checks.
    const www = join(
      t.layout.kubeletRoot,
      "pods",
      p!.metadata!.uid!,
      "volumes",
      "kubernetes.io~empty-dir",
      "www",
    );
    rmSync(join(www, "alive"));
    await settle(async () => {
      const now = await core.readNamespacedPod({ name: p!.metadata!.name!, namespace: NS });
      return (now.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1 && isReady(now);
    }, 60_000);
    expect(existsSync(join(www, "alive"))).toBe(true);
    expect(containerLog(p!, 1)).toContain("config=hello");
  }, 90_000);

  it("stops deleted pods through their preStop hook and SIGTERM within the grace period, unmounting their volumes", async () => {
    const listed = await core.listNamespacedPod({ namespace: NS, labelSelector: "app=web" });
    const pods = listed.items;
    for (const p of pods) expect(nodeMounts(nodeOf(p)).some((m) => m.includes(p.metadata!.uid!))).toBe(true);
    // Each pod followed to its end: the kubelet reports the container's exit before it deletes the pod.
    const exits = new Map<string, number>();
    const gone = new Set<string>();
    const watch = await new Watch(kc).watch(
      `/api/v1/namespaces/${NS}/pods`,
      { labelSelector: "app=web", resourceVersion: listed.metadata!.resourceVersion },
      (phase, pod: V1Pod) => {
        const exitCode = pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode;
        if (exitCode !== undefined) exits.set(pod.metadata!.name!, exitCode);
        if (phase === "DELETED") gone.add(pod.metadata!.name!);
      },
      () => undefined,
    );
    try {
      await apps.deleteNamespacedDeployment({ name: "web", namespace: NS });
      await settle(() => gone.size === pods.length, 60_000);
    } finally {
      watch.abort();
    }
    // The TERM trap's exit 0 ended each one: the kubelet's SIGKILL at the end of the 20 s grace would
    // show as 137. (A wall-clock bound would also count the garbage collector's and a loaded
    // machine's delays, which are not the kubelet's grace.)
    const names = pods.map((p) => p.metadata!.name!);
    expect(Object.fromEntries(exits)).toEqual(Object.fromEntries(names.map((n) => [n, 0])));
    const events = readFileSync(join(handoff, "events.log"), "utf8").split("\n");
    for (const name of names) {
      expect(events.indexOf(`prestop ${name}`)).toBeGreaterThanOrEqual(0);
      expect(events.indexOf(`term ${name}`)).toBeGreaterThan(events.indexOf(`prestop ${name}`));
    }
    for (const p of pods)
      expect(nodeMounts(nodeOf(p)).filter((m) => m.includes(p.metadata!.uid!))).toEqual([]);
  }, 90_000);

  it("stopping the nodes leaves no process, cgroup, mount or file of theirs", async () => {
    for (const t of nodes) {
      const node = t.node!;
      const pids = node.processes.map((p) => ({ ...p }));
      await node.stop();
      for (const p of pids) expect(runs(p.pid, p.marker)).toBe(false);
      expect(node.shimPids()).toEqual([]);
      expect(cgroupPids(t.layout.cgroupRoot)).toEqual([]);
      for (const mount of ["cpu", "memory", "pids", "cpuset"])
        expect(existsSync(join("/sys/fs/cgroup", mount, t.layout.cgroupRoot))).toBe(false);
      expect(KubeletNode.mountsUnder(t.layout.dir)).toEqual([]);
      expect(existsSync(t.layout.dir)).toBe(false);
    }
    expect(KubeletNode.mountsUnder(lab.dir)).toEqual([]);
  }, 120_000);
});
