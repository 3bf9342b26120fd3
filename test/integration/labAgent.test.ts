// The lab node agent end to end, with the run's real control plane: two node namespaces on a node
// bridge, each running the agent (registered as a Node, tainted and labelled so that only this test's
// pods land there), static routes between their pod CIDRs (what flannel host-gw would add). A
// Deployment placed by the scheduler runs httpEcho.ts as its pods, with a ConfigMap volume, downward
// API env, probes, a preStop hook and a least-privilege security context; a hostNetwork pod calls the
// API server with its projected service account token. The cases follow a pod's life: running and
// reachable from the other node, restarted by its liveness probe, adopted by a restarted agent,
// scaled away, deleted with its namespace, and finally every agent stopped; after each, nothing of
// what went away may be left (network namespaces, veths, processes, mounts, mountpoints, records).
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  type V1Deployment,
  type V1Pod,
  type V1PodSpec,
} from "@kubernetes/client-node";
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import {
  alive,
  hostVethName,
  loadRecords,
  pathOfRegistryName,
  podDirName,
  podNetnsName,
  podsRoot,
  REGISTRY_DIR,
} from "@portable-lb/lab/agent";
import { ApiBridge } from "../harness/netns/apiBridge.ts";
import { commandLine, type LabNamespace, type LabProcess, NetnsLab, waitUntil } from "@portable-lb/lab";
import { repoRoot } from "../harness/repoRoot.ts";
import { settle } from "../harness/settle.ts";
import { testKubeConfig, testKubeconfig } from "../harness/testEnv.ts";

const RUN = `la${process.pid}`;
const NS = `labagent-${process.pid}`;
const NS_LAST = `labagent-last-${process.pid}`;
const LABEL = "portable-lb.io/lab-agent-test";
const AGENT_MAIN = join(repoRoot(), "packages/lab/src/agent/main.ts");
const HTTP_ECHO = join(repoRoot(), "test/harness/netns/httpEcho.ts");
const nodeName = (n: number) => `${RUN}-node${n}`;
const nodeIp = (n: number) => `192.168.77.${10 + n}`;
// Mountpoints the pods need that this machine may lack: each must be gone again at the end.
const MOUNTPOINTS = [
  "/etc/web-config",
  "/etc/web-secret",
  "/opt/web",
  "/run/secrets",
  "/dev/termination-log",
];

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const coordination = kc.makeApiClient(CoordinationV1Api);

interface LabNode {
  n: number;
  ns: LabNamespace;
  bridge: ApiBridge;
  stateDir: string;
  nodeRoot: string;
  agent?: LabProcess;
  podCidr?: string;
}

let lab: NetnsLab;
const nodes: LabNode[] = [];
const preexisting = new Map(MOUNTPOINTS.map((p) => [p, existsSync(p)]));
/** Every pod this test saw, by UID: what must be gone at the end. */
const seen = new Map<string, { name: string; node: number }>();

function startAgent(node: LabNode, extra: string[] = []): Promise<LabProcess> {
  return node.ns.spawn(
    "agent",
    process.execPath,
    [
      "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
      AGENT_MAIN,
      ...["--node-name", nodeName(node.n), "--node-ip", nodeIp(node.n)],
      ...[
        "--kubeconfig",
        node.bridge.kubeconfigFile,
        "--state-dir",
        node.stateDir,
        "--node-root",
        node.nodeRoot,
      ],
      ...["--node-labels", `${LABEL}=${RUN}`, "--node-taints", `${LABEL}=${RUN}:NoExecute`],
      ...["--cpu", "2", "--memory", "4Gi"],
      ...extra,
    ],
    // The containers run `node` from the agent's PATH.
    {
      env: { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}` },
      marker: `--node-name ${nodeName(node.n)} `,
    },
  );
}

// NoExecute, not NoSchedule: DaemonSets of other tests that tolerate every NoSchedule taint (as
// flannel's does) stay off these nodes too.
const tolerateOurNodes: Partial<V1PodSpec> = {
  nodeSelector: { [LABEL]: RUN },
  tolerations: [{ key: LABEL, operator: "Equal", value: RUN, effect: "NoExecute" }],
};

// What the container runs first: it shows (in its log) what it sees, then becomes httpEcho.
const STARTUP = [
  `echo "greeting=$(cat /etc/web-config/greeting) init=$(cat /opt/web/data/init.txt)"`,
  `echo "secret=$(cat /etc/web-secret/token) env=$SECRET_TOKEN"`,
  `echo "env pod=$POD_NAME ip=$POD_IP node=$NODE_NAME mem=$MEM_MI greeting=$GREETING api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"`,
  "grep CapEff /proc/self/status",
  "(touch /etc/web-config/x 2>/dev/null && echo config-writable) || echo config-readonly",
  "(touch /lab-agent-root-probe 2>/dev/null && echo root-writable) || echo root-readonly",
  "test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-present",
  // $$ is Kubernetes' escape for $: the shell sees $$, its own pid (1: PID 1 of the container).
  `echo "hostname=$(cat /proc/sys/kernel/hostname) pid=$$$$"`,
  "touch /opt/web/data/alive",
  `exec node --disable-warning=MODULE_TYPELESS_PACKAGE_JSON ${HTTP_ECHO} --port 8080 --name "$POD_NAME"`,
].join("\n");

function webPodSpec(): V1PodSpec {
  return {
    ...tolerateOurNodes,
    terminationGracePeriodSeconds: 5,
    initContainers: [
      {
        name: "init",
        image: "example.com/init:never-pulled",
        command: ["sh", "-c", "echo from-init > /opt/web/data/init.txt"],
        volumeMounts: [{ name: "data", mountPath: "/opt/web/data" }],
      },
    ],
    containers: [
      {
        name: "web",
        image: "example.com/web:never-pulled",
        command: ["/bin/sh", "-c", STARTUP],
        env: [
          { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
          { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
          { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
          { name: "MEM_MI", valueFrom: { resourceFieldRef: { resource: "limits.memory", divisor: "1Mi" } } },
          { name: "GREETING", valueFrom: { configMapKeyRef: { name: "web-config", key: "greeting" } } },
          { name: "SECRET_TOKEN", valueFrom: { secretKeyRef: { name: "web-secret", key: "token" } } },
        ],
        resources: { limits: { memory: "64Mi" } },
        ports: [{ name: "http", containerPort: 8080 }],
        volumeMounts: [
          { name: "config", mountPath: "/etc/web-config", readOnly: true },
          { name: "secret", mountPath: "/etc/web-secret" },
          { name: "data", mountPath: "/opt/web/data" },
          { name: "handoff", mountPath: "/opt/web/handoff" },
        ],
        // Liveness and readiness only run once the server accepts connections.
        startupProbe: { tcpSocket: { port: "http" }, periodSeconds: 1, failureThreshold: 30 },
        readinessProbe: { httpGet: { path: "/ready", port: "http" }, periodSeconds: 1 },
        livenessProbe: {
          exec: { command: ["test", "-f", "/opt/web/data/alive"] },
          periodSeconds: 1,
          failureThreshold: 2,
        },
        lifecycle: {
          preStop: { exec: { command: ["sh", "-c", 'echo "$POD_NAME" >> /opt/web/handoff/prestop.log'] } },
        },
        securityContext: {
          runAsUser: 0,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] },
        },
      },
    ],
    volumes: [
      { name: "config", configMap: { name: "web-config" } },
      { name: "secret", secret: { secretName: "web-secret", defaultMode: 0o400 } },
      { name: "data", emptyDir: {} },
      { name: "handoff", hostPath: { path: "/handoff", type: "DirectoryOrCreate" } },
    ],
  };
}

async function pods(namespace: string, label = "app=web"): Promise<V1Pod[]> {
  const list = await core.listNamespacedPod({ namespace, labelSelector: label });
  for (const p of list.items) {
    const n = nodes.find((x) => nodeName(x.n) === p.spec?.nodeName)?.n;
    if (n !== undefined) seen.set(p.metadata!.uid!, { name: p.metadata!.name!, node: n });
  }
  return list.items;
}

const isReady = (p: V1Pod) =>
  p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
const nodeOf = (p: V1Pod) => nodes.find((x) => nodeName(x.n) === p.spec?.nodeName)!;
const podDir = (p: V1Pod) =>
  join(podsRoot(nodeOf(p).stateDir), podDirName(p.metadata!.namespace!, p.metadata!.name!, p.metadata!.uid!));

/** The pod's running container's first process (from the agent's record). */
function containerPid(p: V1Pod, container = "web"): number | undefined {
  const rec = loadRecords(nodeOf(p).stateDir).find((r) => r.record.uid === p.metadata!.uid)?.record;
  const running = rec?.containers[container]?.running;
  return running?.init && alive(running.init) ? running.init.pid : undefined;
}

/** Waits until the node's Node is Ready; notes its podCIDR. */
async function nodeReady(node: LabNode): Promise<void> {
  await settle(async () => {
    const n = await core.readNode({ name: nodeName(node.n) }).catch(() => undefined);
    node.podCidr = n?.spec?.podCIDR;
    return n?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
  }, 60_000);
}

/** A namespace for the web pods: their ConfigMap and Secret, and its default ServiceAccount. */
async function appNamespace(name: string, greeting: string, token: string): Promise<void> {
  await core.createNamespace({ body: { metadata: { name } } });
  await core.createNamespacedConfigMap({
    namespace: name,
    body: { metadata: { name: "web-config" }, data: { greeting } },
  });
  await core.createNamespacedSecret({
    namespace: name,
    body: { metadata: { name: "web-secret" }, stringData: { token } },
  });
  // Pods are admitted once the controller-manager made it.
  await settle(async () => {
    const sa = await core
      .readNamespacedServiceAccount({ name: "default", namespace: name })
      .catch(() => undefined);
    return sa !== undefined;
  });
}

async function netnsNames(): Promise<string[]> {
  return (await nodes[0]!.ns.run("ip", ["netns", "list"])).split("\n").map((l) => l.split(" ")[0]!);
}

async function get(from: LabNamespace, url: string): Promise<{ backend: string; name: string }> {
  return JSON.parse(await from.run("curl", ["-sS", "--noproxy", "*", "--max-time", "5", url])) as {
    backend: string;
    name: string;
  };
}

/** Every mount point of every mount namespace on the machine. */
function allMountPoints(): string[] {
  const points = new Set<string>();
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      for (const line of readFileSync(`/proc/${pid}/mountinfo`, "utf8").split("\n"))
        points.add(line.split(" ")[4] ?? "");
    } catch {
      // gone, or not readable
    }
  }
  return [...points];
}

/** Processes still running a pod this test saw (by its name in httpEcho's command line). */
function podProcesses(): string[] {
  const names = [...seen.values()].map((s) => `--name ${s.name}`);
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .map((p) => commandLine(Number(p)) ?? "")
    .filter((line) => line.includes(HTTP_ECHO) && names.some((n) => line.endsWith(n)));
}

async function expectNothingLeftOf(uids: string[]): Promise<void> {
  const netns = await netnsNames();
  for (const uid of uids) expect(netns).not.toContain(podNetnsName(uid));
  for (const node of nodes) {
    const links = await node.ns.ip("-o", "link", "show");
    for (const uid of uids) expect(links).not.toContain(hostVethName(uid));
    const ipam = readFileSync(join(node.stateDir, "ipam.json"), "utf8");
    for (const uid of uids) expect(ipam).not.toContain(uid);
  }
  const mounts = allMountPoints();
  for (const node of nodes)
    expect(mounts.filter((m) => m.startsWith(node.stateDir) || m.startsWith(node.nodeRoot))).toEqual([]);
}

beforeAll(async () => {
  lab = await NetnsLab.create("labagent");
  const lan = await lab.namespace("lan");
  const nodeNet = await lab.bridge(lan, "nodes");
  for (const n of [1, 2]) {
    const ns = await lab.namespace(`node${n}`);
    await lab.attach(nodeNet, ns, `${nodeIp(n)}/24`, "eth0");
    nodes.push({
      n,
      ns,
      bridge: await ApiBridge.open(ns, testKubeconfig()),
      stateDir: join(lab.dir, `node${n}-state`),
      nodeRoot: join(lab.dir, `node${n}-root`),
    });
  }
  for (const node of nodes) node.agent = await startAgent(node);
});

afterAll(async () => {
  // Agents still running stop their pods cleanly; whatever a failed case left is removed by its record.
  await Promise.all(nodes.map((n) => n.agent?.stop(60_000) ?? Promise.resolve()));
  for (const node of nodes) {
    for (const { record } of loadRecords(node.stateDir)) {
      for (const c of Object.values(record.containers)) {
        for (const p of [c.running?.init, c.running?.shim]) if (p && alive(p)) process.kill(p.pid, "SIGKILL");
      }
      if (record.netns) rmSync(`/run/netns/${record.netns}`, { force: true });
    }
  }
  for (const ns of [NS, NS_LAST]) await core.deleteNamespace({ name: ns }).catch(() => undefined);
  for (const n of [1, 2]) await core.deleteNode({ name: nodeName(n) }).catch(() => undefined);
  await Promise.all(nodes.map((n) => n.bridge.close()));
  rmSync("/lab-agent-root-probe", { force: true });
  await lab?.destroy();
});

describe("the lab node agent", () => {
  it("registers each node Ready, with a podCIDR, its labels, a Lease and the pod bridge", async () => {
    for (const node of nodes) {
      await nodeReady(node);
      const n = await core.readNode({ name: nodeName(node.n) });
      expect(n.metadata?.labels).toMatchObject({
        "kubernetes.io/hostname": nodeName(node.n),
        "kubernetes.io/os": "linux",
        [LABEL]: RUN,
      });
      expect(n.spec?.taints).toEqual([{ key: LABEL, value: RUN, effect: "NoExecute" }]);
      expect(n.status?.addresses).toContainEqual({ type: "InternalIP", address: nodeIp(node.n) });
      expect(n.status?.capacity).toMatchObject({ cpu: "2", memory: "4Gi", pods: "110" });
      const lease = await coordination.readNamespacedLease({
        name: nodeName(node.n),
        namespace: "kube-node-lease",
      });
      expect(lease.spec?.holderIdentity).toBe(nodeName(node.n));
      expect(Date.now() - new Date(lease.spec!.renewTime!).getTime()).toBeLessThan(30_000);
      expect(node.podCidr).toMatch(/^10\.244\.\d+\.0\/24$/);
      const gateway = node.podCidr!.replace(/0\/24$/, "1/24");
      expect(await node.ns.ip("-o", "address", "show", "dev", "cni0")).toContain(gateway);
      expect(await node.ns.sysctl("net.ipv4.ip_forward")).toBe("1");
    }
    // host-gw by hand: each node reaches the other's pods through it.
    const [a, b] = nodes as [LabNode, LabNode];
    await a.ns.route(b.podCidr!, nodeIp(b.n));
    await b.ns.route(a.podCidr!, nodeIp(a.n));
  });

  it("runs a Deployment's pods Ready in their node's pod CIDR, reachable from the other node, as specified", async () => {
    await appNamespace(NS, "hello from the lab", "s3cret");
    const deployment: V1Deployment = {
      metadata: { name: "web" },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: "web" } },
        template: {
          metadata: { labels: { app: "web" } },
          spec: {
            ...webPodSpec(),
            // One per node: both nodes' agents and the path between them are exercised.
            affinity: {
              podAntiAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: [
                  { labelSelector: { matchLabels: { app: "web" } }, topologyKey: "kubernetes.io/hostname" },
                ],
              },
            },
          },
        },
      },
    };
    await apps.createNamespacedDeployment({ namespace: NS, body: deployment });
    await settle(async () => {
      const ps = await pods(NS);
      return ps.length === 2 && ps.every(isReady);
    }, 90_000);

    for (const p of await pods(NS)) {
      const node = nodeOf(p);
      const other = nodes.find((x) => x !== node)!;
      const ip = p.status!.podIP!;
      const [base] = node.podCidr!.split(".0/");
      expect(ip.startsWith(`${base}.`)).toBe(true);
      expect(p.status).toMatchObject({ phase: "Running", hostIP: nodeIp(node.n), podIPs: [{ ip }] });
      expect(p.status?.containerStatuses?.[0]).toMatchObject({
        name: "web",
        ready: true,
        started: true,
        restartCount: 0,
      });
      expect(p.status?.containerStatuses?.[0]?.state?.running).toBeDefined();
      for (const type of ["PodScheduled", "Initialized", "ContainersReady", "Ready"]) {
        expect(p.status?.conditions?.find((c) => c.type === type)?.status).toBe("True");
      }
      // From the other node's namespace, across the node network.
      expect(await get(other.ns, `http://${ip}:8080/`)).toMatchObject({
        backend: ip,
        name: p.metadata!.name,
      });
      // What the process saw, in its log under the agent's state folder.
      const log = readFileSync(join(podDir(p), "web.log"), "utf8");
      // The init container ran first, into the shared emptyDir.
      expect(log).toContain("greeting=hello from the lab init=from-init");
      expect(p.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({
        exitCode: 0,
        reason: "Completed",
      });
      expect(log).toContain("secret=s3cret env=s3cret");
      expect(log).toContain(
        `env pod=${p.metadata!.name} ip=${ip} node=${nodeName(node.n)} mem=64 greeting=hello from the lab api=127.0.0.1:6443`,
      );
      // drop ALL, add NET_ADMIN: exactly bit 12.
      expect(log).toMatch(/CapEff:\s+0000000000001000/);
      expect(log).toContain("config-readonly");
      expect(log).toContain("root-readonly");
      expect(log).toContain("token-present");
      expect(log).toContain(`hostname=${p.metadata!.name} pid=1`);
    }
    expect(existsSync("/lab-agent-root-probe")).toBe(false);
  });

  it("runs a hostNetwork pod in the node's namespace, whose in-cluster client reaches the API server with its token", async () => {
    const D = "/var/run/secrets/kubernetes.io/serviceaccount";
    const call = [
      `curl -sS --max-time 10 --cacert ${D}/ca.crt -H "Authorization: Bearer $(cat ${D}/token)"`,
      `-H 'Content-Type: application/json' -X POST -d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}'`,
      `"https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/apis/authentication.k8s.io/v1/selfsubjectreviews"`,
    ].join(" ");
    await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name: "api-client", labels: { app: "api-client" } },
        spec: {
          ...tolerateOurNodes,
          nodeSelector: { ...tolerateOurNodes.nodeSelector, "kubernetes.io/hostname": nodeName(1) },
          hostNetwork: true,
          restartPolicy: "Never",
          containers: [
            {
              name: "client",
              image: "example.com/curl",
              command: ["sh", "-c", `${call} && echo && id -u && cat /proc/sys/kernel/hostname`],
              // Not root: the projected token and CA are readable by any user.
              securityContext: { runAsUser: 1000, runAsGroup: 1000 },
            },
          ],
        },
      },
    });
    await settle(async () => (await pods(NS, "app=api-client"))[0]?.status?.phase === "Succeeded", 60_000);
    const [p] = await pods(NS, "app=api-client");
    expect(p!.status).toMatchObject({ podIP: nodeIp(1), hostIP: nodeIp(1) });
    expect(p!.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 0,
      reason: "Completed",
    });
    const log = readFileSync(join(podDir(p!), "client.log"), "utf8");
    expect(log).toMatch(new RegExp(`"username": ?"system:serviceaccount:${NS}:default"`));
    expect(log.trim().split("\n").slice(-2)).toEqual(["1000", nodeName(1)]);
    await core.deleteNamespacedPod({ name: "api-client", namespace: NS });
  });

  it("re-projects a changed ConfigMap into the running containers' mount", async () => {
    await core.patchNamespacedConfigMap({
      name: "web-config",
      namespace: NS,
      body: [{ op: "replace", path: "/data/greeting", value: "updated" }],
    });
    for (const p of await pods(NS)) {
      const pid = containerPid(p)!;
      await settle(async () => {
        const r = await nodeOf(p).ns.exec("nsenter", [
          `--target=${pid}`,
          "--mount",
          "cat",
          "/etc/web-config/greeting",
        ]);
        return r.stdout === "updated";
      });
    }
  });

  it("restarts a container whose liveness probe fails, with restartCount 1 and the same address", async () => {
    const [p] = await pods(NS);
    const name = p!.metadata!.name!;
    const before = containerPid(p!);
    rmSync(join(podDir(p!), "volumes/data/alive"));
    await settle(async () => {
      const now = (await pods(NS)).find((x) => x.metadata!.name === name)!;
      return now.status?.containerStatuses?.[0]?.restartCount === 1 && isReady(now);
    }, 60_000);
    const now = (await pods(NS)).find((x) => x.metadata!.name === name)!;
    expect(now.status?.podIP).toBe(p!.status?.podIP);
    // httpEcho ends cleanly on the SIGTERM that follows the failed probe.
    expect(now.status?.containerStatuses?.[0]?.lastState?.terminated).toMatchObject({
      exitCode: 0,
      reason: "Completed",
    });
    expect(containerPid(now)).not.toBe(before);
    const events = await core.listNamespacedEvent({
      namespace: NS,
      fieldSelector: `involvedObject.uid=${p!.metadata!.uid}`,
    });
    expect(events.items.map((e) => e.reason)).toEqual(
      expect.arrayContaining(["Started", "Unhealthy", "Killing"]),
    );
  });

  it("adopts its running containers after being killed and started again", async () => {
    const node = nodes[0]!;
    const p = (await pods(NS)).find((x) => nodeOf(x) === node)!;
    const pid = containerPid(p);
    const restarts = p.status?.containerStatuses?.[0]?.restartCount;
    process.kill(node.agent!.pid, "SIGKILL");
    expect(await waitUntil(() => !node.agent!.running(), 5_000)).toBe(true);
    node.agent = await startAgent(node);
    await settle(async () => {
      const n = await core.readNode({ name: nodeName(node.n) });
      return (
        n.status?.conditions?.some(
          (c) => c.type === "Ready" && c.status === "True" && c.message?.includes("posting ready"),
        ) === true && readFileSync(node.agent!.logFile, "utf8").includes("adopted a running container")
      );
    }, 60_000);
    // The same process, no restart, still ready and serving.
    expect(containerPid(p)).toBe(pid);
    const now = (await pods(NS)).find((x) => x.metadata!.uid === p.metadata!.uid)!;
    expect(now.status?.containerStatuses?.[0]?.restartCount).toBe(restarts);
    expect(isReady(now)).toBe(true);
    expect(await get(nodes[1]!.ns, `http://${p.status!.podIP}:8080/`)).toMatchObject({
      name: p.metadata!.name,
    });
    // And still probed: a liveness failure restarts it.
    rmSync(join(podDir(p), "volumes/data/alive"));
    await settle(async () => {
      const after = (await pods(NS)).find((x) => x.metadata!.uid === p.metadata!.uid)!;
      return after.status?.containerStatuses?.[0]?.restartCount === restarts! + 1 && isReady(after);
    }, 60_000);
  });

  it("scaling down runs the preStop hook, then removes the pod's netns, veth, address and processes", async () => {
    const before = await pods(NS);
    const handoff = (n: LabNode) => join(n.nodeRoot, "handoff/prestop.log");
    const count = (n: LabNode, name: string) =>
      existsSync(handoff(n))
        ? readFileSync(handoff(n), "utf8")
            .split("\n")
            .filter((l) => l === name).length
        : 0;
    const counts = new Map(before.map((p) => [p.metadata!.uid!, count(nodeOf(p), p.metadata!.name!)]));
    await apps.patchNamespacedDeploymentScale({
      name: "web",
      namespace: NS,
      body: [{ op: "replace", path: "/spec/replicas", value: 1 }],
    });
    await settle(async () => (await pods(NS)).length === 1, 60_000);
    const remaining = (await pods(NS)).map((p) => p.metadata!.uid!);
    const removed = before.filter((p) => !remaining.includes(p.metadata!.uid!));
    expect(removed).toHaveLength(1);
    const r = removed[0]!;
    expect(count(nodeOf(r), r.metadata!.name!)).toBe(counts.get(r.metadata!.uid!)! + 1);
    await expectNothingLeftOf([r.metadata!.uid!]);
    expect(existsSync(podDir(r))).toBe(false);
    expect(podProcesses().filter((l) => l.endsWith(`--name ${r.metadata!.name}`))).toEqual([]);
  });

  it("deleting the namespace leaves no network namespace, process, mount or mountpoint", async () => {
    await core.deleteNamespace({ name: NS });
    await settle(async () => (await core.listNamespacedPod({ namespace: NS })).items.length === 0, 90_000);
    await settle(() => nodes.every((n) => loadRecords(n.stateDir).length === 0));
    await expectNothingLeftOf([...seen.keys()]);
    expect(podProcesses()).toEqual([]);
    for (const [path, existed] of preexisting) if (!existed) expect(existsSync(path)).toBe(false);
    // Other labs' agents may share the registry: only this test's mountpoints must be off it.
    const registered = (existsSync(REGISTRY_DIR) ? readdirSync(REGISTRY_DIR) : []).map(pathOfRegistryName);
    expect(
      registered.filter((p) => [...MOUNTPOINTS, "/var/run/secrets"].some((m) => p.startsWith(m))),
    ).toEqual([]);
  });

  it("stopping the agents stops their pods cleanly and leaves nothing; the Node goes unless asked to stay", async () => {
    // Node 2's agent again, now with --keep-node: its Node is registered anew (with a new UID and
    // maybe another podCIDR: the bridge follows).
    const keeper = nodes[1]!;
    await keeper.agent!.stop(60_000);
    await expect(core.readNode({ name: nodeName(keeper.n) })).rejects.toMatchObject({ code: 404 });
    keeper.agent = await startAgent(keeper, ["--keep-node"]);
    await nodeReady(keeper);
    const gateway = keeper.podCidr!.replace(/0\/24$/, "1/");
    expect((await keeper.ns.ip("-o", "-4", "address", "show", "dev", "cni0")).trim().split("\n")).toEqual([
      expect.stringContaining(` ${gateway}24 `),
    ]);

    await appNamespace(NS_LAST, "last", "t");
    for (const n of [1, 2]) {
      const spec = webPodSpec();
      spec.nodeSelector = { ...spec.nodeSelector, "kubernetes.io/hostname": nodeName(n) };
      await core.createNamespacedPod({
        namespace: NS_LAST,
        body: { metadata: { name: `last-${n}`, labels: { app: "web" } }, spec },
      });
    }
    await settle(async () => {
      const ps = await pods(NS_LAST);
      return ps.length === 2 && ps.every(isReady);
    }, 60_000);
    const last = await pods(NS_LAST);
    await Promise.all(nodes.map((n) => n.agent!.stop(60_000)));
    for (const node of nodes) {
      expect(node.agent!.running()).toBe(false);
      expect(readFileSync(node.agent!.logFile, "utf8")).toContain('"msg":"stopped"');
      expect(readFileSync(join(node.nodeRoot, "handoff/prestop.log"), "utf8")).toContain(`last-${node.n}`);
      expect(loadRecords(node.stateDir)).toEqual([]);
    }
    const lease = (n: LabNode) =>
      coordination.readNamespacedLease({ name: nodeName(n.n), namespace: "kube-node-lease" });
    await expect(core.readNode({ name: nodeName(1) })).rejects.toMatchObject({ code: 404 });
    await expect(lease(nodes[0]!)).rejects.toMatchObject({ code: 404 });
    // --keep-node: the Node stays, not ready, with its Lease (which the agent no longer renews).
    const kept = await core.readNode({ name: nodeName(keeper.n) });
    expect(kept.status?.conditions?.find((c) => c.type === "Ready")).toMatchObject({
      status: "False",
      message: "the lab agent stopped",
    });
    expect((await lease(keeper)).spec?.holderIdentity).toBe(nodeName(keeper.n));
    // The pods were reported stopped (until the pod garbage collector removes them with their Node).
    for (const p of last) {
      const now = await core
        .readNamespacedPod({ name: p.metadata!.name!, namespace: NS_LAST })
        .catch(() => undefined);
      if (now) expect(now.status?.phase).toMatch(/^(Failed|Succeeded)$/);
    }
    await expectNothingLeftOf([...seen.keys()]);
    expect(podProcesses()).toEqual([]);
    for (const [path, existed] of preexisting) if (!existed) expect(existsSync(path)).toBe(false);
  });
});
