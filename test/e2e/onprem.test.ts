// The onprem environment for real, on lab machines (test/harness/onprem/sshLabMachine.ts): sshd in
// lab network namespaces, each machine with its own /etc, /var/lib, /run and cgroups, prepared as a
// site's operator would (containerd, the pinned kubeadm/kubelet/kubectl, the images in its containerd
// because no registry is reachable, a kubeadm patch with its kubelet settings). Over real SSH, with
// OnpremCluster's very commands, the scripts the renderer gives each machine are copied and run:
// kubeadm init makes a real control plane (etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler as static pods under containerd and runc), two LB nodes and a worker join it with the
// bootstrap token and the CA hash, and the admin kubeconfig made from the cluster CA (as OnpremCluster
// makes it, without SSH) drives the cluster. Then the root program deploys PortableCluster on it with
// the real Pulumi engine (flannel host-gw, the LB pods, a route reflector, the demo web service), the
// site's router (FRR, configured with the routerConfig output) learns the VIP with both LB nodes as
// ECMP next hops, and a client outside reaches it. This host's cgroups are v1, so the environment says
// machines.cgroupV1. Nothing of the host's /etc, sysctls or apt changes.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_LB_NAMESPACE, DEFAULT_LB_NODE_SELECTOR, LB_APP_LABEL } from "@portable-lb/core";
import {
  CONTROL_PLANE_IMAGE_REPOSITORY,
  FrrRouter,
  NetnsLab,
  builtLbImage,
  controlPlaneImages,
  curlSpread,
  issueClientCert,
  kubeProxyConfig,
  labImage,
  labNodeImages,
  routerNextHops,
  runs,
  waitUntil,
  type LabNamespace,
  type RequestPath,
} from "@portable-lb/lab";
import {
  ADMIN_GROUP,
  COPY_SCRIPT,
  KUBERNETES_VERSION,
  RUN_SCRIPT,
  onpremEnvironmentSchema,
  renderAdminKubeconfig,
} from "@portable-lb/providers";
import {
  TEST_CA_CERT,
  TEST_CA_KEY,
  TEST_JOIN_TOKEN,
  testCredentialsScript,
} from "../../packages/providers/src/bootstrap/__fixtures__/testCredentials.ts";
import { MACHINE_KUBEADM_PATCHES, SshLabMachine } from "../harness/onprem/sshLabMachine.ts";
import { repoRoot } from "../harness/repoRoot.ts";
import { TcpProxy } from "../harness/tcpProxy.ts";
import { TestStack } from "../harness/testStack.ts";

/** The site's router and admin host: where pulumi's SSH comes from, and the BGP peer. */
const CLIENT = "192.168.79.1";
const CP = "192.168.79.10";
const LB1 = "192.168.79.11";
const LB2 = "192.168.79.12";
const W1 = "192.168.79.21";
/** A client outside the site, behind its router. */
const OUTSIDE = { router: "172.31.79.1", client: "172.31.79.2" };
const MACHINES = [
  { name: "cp", role: "control-plane", address: CP },
  { name: "lb-1", role: "lb", address: LB1 },
  { name: "lb-2", role: "lb", address: LB2 },
  { name: "w-1", role: "worker", address: W1 },
] as const;
type MachineName = (typeof MACHINES)[number]["name"];
const JOINING = MACHINES.filter((m) => m.role !== "control-plane");
const network = { podCidr: "10.244.0.0/16", serviceCidr: "10.96.0.0/16" };
const VIP_POOL = "10.1.79.0/24";
const cgroupV1 = !existsSync("/sys/fs/cgroup/cgroup.controllers");
/** What the lab's kube-proxies leave alone on a shared machine (kubeProxyConfig.ts says why). */
const labProxy = JSON.parse(
  kubeProxyConfig({ nodeName: "cp", kubeconfig: "", clusterCidr: network.podCidr }),
) as {
  conntrack: Record<string, number | string>;
  oomScoreAdj: number;
};
/** The environment's `machines`, as a site with these machines would set it. */
const machines = {
  cgroupV1,
  imageRepository: CONTROL_PLANE_IMAGE_REPOSITORY,
  kubeadmPatches: MACHINE_KUBEADM_PATCHES,
  kubeProxy: { conntrack: labProxy.conntrack, oomScoreAdj: labProxy.oomScoreAdj },
};
/** Host files the script would write or rewrite on a machine of its own. */
const HOST_FILES = ["/etc/fstab", "/etc/sysctl.d", "/etc/modules-load.d", "/etc/apt/sources.list.d"];
const hostState = () => ({
  files: HOST_FILES.map((f) => [f, existsSync(f) ? statSync(f).mtimeMs : undefined]),
  kubernetes: existsSync("/etc/kubernetes") ? readdirSync("/etc/kubernetes") : undefined,
  varLibPortableLb: existsSync("/var/lib/portable-lb"),
  forwarding: readFileSync("/proc/sys/net/ipv4/ip_forward", "utf8"),
});

let lab: NetnsLab;
let client: LabNamespace;
let outside: LabNamespace;
/** The outside client's requests cross the site's router (the client namespace) to the LB nodes. */
let path: RequestPath;
const machine = {} as Record<MachineName, SshLabMachine>;
let keys: string;
let kubeconfig: string;
/** The same credentials for this host's side (the Pulumi engine): the API server through apiProxy. */
let hostKubeconfig: string;
let apiProxy: TcpProxy | undefined;
let stack: TestStack | undefined;
let router: FrrRouter | undefined;
const hostBefore = hostState();

/** ssh from the client namespace as OnpremCluster's connection would: root, the key, the host key checked. */
const ssh = (address: string, command: string, opts: { input?: string; timeoutMs?: number } = {}) =>
  client.exec(
    "ssh",
    [
      "-F",
      "/dev/null",
      "-i",
      join(keys, "id_ed25519"),
      "-o",
      "BatchMode=yes",
      "-o",
      "StrictHostKeyChecking=yes",
      "-o",
      `UserKnownHostsFile=${join(keys, "known_hosts")}`,
      "-o",
      "ConnectTimeout=5",
      `root@${address}`,
      command,
    ],
    { timeoutMs: opts.timeoutMs ?? 30_000, ...(opts.input !== undefined && { input: opts.input }) },
  );

/** kubectl from the client namespace with the admin kubeconfig; its output, or an error with what it said. */
const kubectl = async (...args: string[]) => {
  const r = await client.exec("kubectl", ["--kubeconfig", kubeconfig, "--request-timeout=10s", ...args], {
    timeoutMs: 20_000,
  });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: exit ${r.code}: ${r.stderr.trim()}`);
  return r.stdout.trim();
};

/** kubectl's output once `done` holds for it (the kubelets report on their own time), or its last. */
const kubectlUntil = async (done: (out: string) => boolean, timeoutMs: number, ...args: string[]) => {
  let out = "";
  await waitUntil(async () => done((out = await kubectl(...args).catch(() => ""))), timeoutMs, 1_000);
  return out;
};

const scriptFor = ({ name, role, address }: (typeof MACHINES)[number]) =>
  testCredentialsScript(
    { name, role, address },
    // The API server's certificate also covers 127.0.0.1, where this host's engine reaches it.
    { controlPlaneAddress: CP, apiServerCertSans: [CP, "127.0.0.1"], network, machines, lbTaint: true },
  );

beforeAll(async () => {
  keys = mkdtempSync(join(tmpdir(), "plb-onprem-keys-"));
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", join(keys, "id_ed25519")]);
  lab = await NetnsLab.create("onprem");
  client = await lab.namespace("client");
  // One segment, as a site's node network: the client (where pulumi runs, and the site's router) and
  // the machines, whose default route is that router.
  const segment = await lab.bridge(client, "nodes", `${CLIENT}/24`);
  outside = await lab.namespace("outside");
  const world = await lab.bridge(client, "outside", `${OUTSIDE.router}/24`);
  path = {
    client: { netns: outside.netns, ip: OUTSIDE.client },
    router: { netns: client.netns, clientIface: world.name },
    nodes: MACHINES.map((m) => ({ name: m.name, ip: m.address })),
  };
  await lab.attach(world, outside, `${OUTSIDE.client}/24`);
  await outside.route("default", OUTSIDE.router);
  // The router forwards, and spreads flows over equal paths by their ports (what routerAdvice says).
  await client.sysctl("net.ipv4.ip_forward", "1");
  await client.sysctl("net.ipv4.fib_multipath_hash_policy", "1");
  const authorizedKey = readFileSync(join(keys, "id_ed25519.pub"), "utf8");
  // kubeadm's images, and what PortableCluster and the demo app run: no registry is reachable here.
  const images = [...controlPlaneImages(), ...labNodeImages()];
  const known: string[] = [];
  for (const { name, address } of MACHINES) {
    const ns = await lab.namespace(name);
    await lab.attach(segment, ns, `${address}/24`);
    await ns.route("default", CLIENT);
    machine[name] = await SshLabMachine.start({
      name,
      scope: lab.id,
      ns,
      address,
      dir: join(lab.dir, `machine-${name}`),
      authorizedKey,
      images,
      imageRepository: machines.imageRepository,
    });
    known.push(`${address} ${machine[name].hostKey}`);
  }
  writeFileSync(join(keys, "known_hosts"), `${known.join("\n")}\n`);
  // The admin kubeconfig as OnpremCluster makes it: a client certificate from the cluster CA.
  writeFileSync(join(keys, "ca.crt"), TEST_CA_CERT);
  writeFileSync(join(keys, "ca.key"), TEST_CA_KEY, { mode: 0o600 });
  const admin = await issueClientCert(keys, { name: "admin", user: "plb-admin", groups: [ADMIN_GROUP] });
  const adminKubeconfig = (server: string) =>
    renderAdminKubeconfig({
      clusterName: "plb",
      server,
      caCertPem: TEST_CA_CERT,
      clientCertPem: readFileSync(admin.cert, "utf8"),
      clientKeyPem: readFileSync(admin.key, "utf8"),
    });
  kubeconfig = join(keys, "admin.kubeconfig");
  writeFileSync(kubeconfig, adminKubeconfig(`https://${CP}:6443`), { mode: 0o600 });
  // This host reaches the API server on its loopback: a forwarder in the client namespace serves a
  // unix socket (found by path across namespaces), and a loopback proxy here forwards to it.
  const socket = join(keys, "api.sock");
  const forwarder = join(repoRoot(), "packages/lab/src/forwarder.ts");
  await client.spawn("api-forwarder", process.execPath, [
    "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
    forwarder,
    ...["--listen", `unix:${socket}`, "--connect", `tcp:${CP}:6443`],
  ]);
  apiProxy = new TcpProxy({ path: socket });
  const port = await apiProxy.up();
  hostKubeconfig = join(keys, "host.kubeconfig");
  writeFileSync(hostKubeconfig, adminKubeconfig(`https://127.0.0.1:${port}`), { mode: 0o600 });
}, 600_000);

afterAll(async () => {
  await router?.stop();
  await stack?.dispose();
  await apiProxy?.cut();
  for (const m of Object.values(machine)) await m?.stop();
  await lab?.destroy();
  rmSync(keys, { recursive: true, force: true });
}, 180_000);

describe("the onprem environment on lab machines: the bootstrap over SSH, then PortableCluster", () => {
  let init: Awaited<ReturnType<typeof ssh>>;

  it("copies the renderer's script with OnpremCluster's command: root-only, where cloud-init keeps it", async () => {
    const script = scriptFor(MACHINES[0]);
    const copy = await ssh(CP, COPY_SCRIPT, { input: script });
    expect(copy.stderr).toBe("");
    expect(copy.code).toBe(0);
    const copied = join(machine.cp.varLib, "portable-lb", "bootstrap.sh");
    expect(readFileSync(copied, "utf8")).toBe(script);
    expect(statSync(copied).mode & 0o777).toBe(0o700);
    expect(statSync(join(machine.cp.varLib, "portable-lb")).mode & 0o777).toBe(0o700);
    // Its sshd's host key is one the environment takes (environment.nodes[].hostKey), and so are
    // these machines' settings.
    const node = { name: "cp", host: CP, address: CP, role: "control-plane" };
    const parsed = onpremEnvironmentSchema.safeParse({
      kind: "onprem",
      nodes: MACHINES.map((m) => ({ ...node, ...m, host: m.address, hostKey: machine[m.name].hostKey })),
      machines,
    });
    expect(parsed.error).toBeUndefined();
  });

  it("inits the control plane with OnpremCluster's command: kubeadm makes it from the given CA", async () => {
    init = await ssh(CP, RUN_SCRIPT, { timeoutMs: 420_000 });
    const output = init.stdout + init.stderr;
    expect(init.timedOut).toBe(false);
    // The install step is skipped: the pinned binaries are there, no package repository is asked.
    expect(output).toContain(`portable-lb: cp has containerd and Kubernetes ${KUBERNETES_VERSION} already`);
    expect(existsSync(join(machine.cp.etcChanges, "apt"))).toBe(false);
    expect(output).toContain(`[init] Using Kubernetes version: v${KUBERNETES_VERSION}`);
    // On cgroup v1 only the check the environment said to skip fails, and is skipped.
    const ignored = [...output.matchAll(/\[WARNING ([^\]]+)\]: cgroups v1/g)].map((m) => m[1]);
    expect(ignored).toEqual(cgroupV1 ? ["SystemVerification"] : []);
    expect(output).not.toMatch(/\[ERROR /);
    expect(output).toContain("Your Kubernetes control-plane has initialized successfully!");
    expect(output).toContain("portable-lb: cp runs the control plane");
    expect(init.code).toBe(0);
    const pki = join(machine.cp.etcChanges, "kubernetes", "pki");
    expect(readFileSync(join(pki, "ca.crt"), "utf8").trimEnd()).toBe(TEST_CA_CERT.trimEnd());
    expect(statSync(join(pki, "ca.key")).mode & 0o777).toBe(0o600);
    expect(statSync(join(machine.cp.etcChanges, "kubernetes", "portable-lb-kubeadm.yaml")).mode & 0o777).toBe(
      0o600,
    );
    // The kernel settings took effect in the machine's network namespace.
    expect((await machine.cp.spec.ns.sysctl("net.ipv4.ip_forward")).trim()).toBe("1");
    // kubeadm applied the machine's own patch to its kubelet's configuration.
    const kubelet = readFileSync(join(machine.cp.varLib, "kubelet", "config.yaml"), "utf8");
    expect(kubelet).toContain(`cgroupRoot: ${machine.cp.layout.cgroupRoot}`);
    expect(kubelet).toContain("cgroupDriver: cgroupfs");
  }, 450_000);

  it("serves the API to the admin kubeconfig made from the cluster CA, with its control plane as static pods", async () => {
    expect(await kubectl("get", "--raw", "/readyz")).toBe("ok");
    const components = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];
    // Each kubelet posts its static pods' mirrors once its node is registered.
    const pods = await kubectlUntil(
      (out) => components.every((c) => out.includes(`${c}-cp=Running`)),
      90_000,
      "get",
      "pods",
      "-n",
      "kube-system",
      "-o",
      "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{'\\n'}{end}",
    );
    const running = pods.split("\n").filter((l) => l.endsWith("=Running"));
    for (const component of components) expect(running).toContain(`${component}-cp=Running`);
    // Every one from the mirror the environment named, none from a public registry.
    const images = await kubectl(
      "get",
      "pods",
      "-n",
      "kube-system",
      "-o",
      "jsonpath={range .items[*]}{range .spec.containers[*]}{.image}{'\\n'}{end}{end}",
    );
    const used = [...new Set(images.split("\n"))].sort();
    expect(used.filter((i) => !i.startsWith("localhost/portable-lb/"))).toEqual([]);
    expect(used).toEqual(
      expect.arrayContaining([`localhost/portable-lb/kube-apiserver:v${KUBERNETES_VERSION}`]),
    );
  }, 120_000);

  it.each(JOINING)(
    "joins $name ($role) with the bootstrap token and the CA hash",
    async (m) => {
      const copy = await ssh(m.address, COPY_SCRIPT, { input: scriptFor(m) });
      expect(copy.code).toBe(0);
      const join_ = await ssh(m.address, RUN_SCRIPT, { timeoutMs: 300_000 });
      const output = join_.stdout + join_.stderr;
      expect(output).not.toMatch(/\[ERROR /);
      expect(output).toContain("This node has joined the cluster");
      expect(output).toContain(`portable-lb: ${m.name} joined the cluster`);
      expect(join_.code).toBe(0);
    },
    330_000,
  );

  it("keeps the join token for machines added later: it never expires", async () => {
    const [id] = TEST_JOIN_TOKEN.split(".");
    const secret = JSON.parse(
      await kubectl("get", "secret", "-n", "kube-system", `bootstrap-token-${id}`, "-o", "json"),
    ) as { type: string; data: Record<string, string> };
    expect(secret.type).toBe("bootstrap.kubernetes.io/token");
    expect(Object.keys(secret.data)).toContain("usage-bootstrap-authentication");
    // kubeadm writes an expiration only for a token with a TTL; the token cleaner deletes it then.
    expect(secret.data["expiration"]).toBeUndefined();
  });

  it("labels and taints the LB nodes, and only them (environment.lbTaint)", async () => {
    const [key, value] = Object.entries(DEFAULT_LB_NODE_SELECTOR)[0]!;
    const lbNodes = await kubectlUntil(
      (out) => out.split("\n").length === 2,
      60_000,
      "get",
      "nodes",
      "-l",
      `${key}=${value}`,
      "-o",
      "name",
    );
    expect(lbNodes.split("\n").sort()).toEqual(["node/lb-1", "node/lb-2"]);
    const taints = await kubectl(
      "get",
      "nodes",
      "-o",
      "jsonpath={range .items[*]}{.metadata.name}={.spec.taints[*].key}{'\\n'}{end}",
    );
    // Kubernetes' own node.kubernetes.io/* taints (not-ready, while a kubelet starts) come and go.
    const ours = taints
      .split("\n")
      .map((l) => l.replace(/ ?node\.kubernetes\.io\/[a-z-]+/g, ""))
      .sort();
    expect(ours).toEqual(["cp=node-role.kubernetes.io/control-plane", `lb-1=${key}`, `lb-2=${key}`, "w-1="]);
  }, 90_000);

  it("brings every node Ready: the kubelets run, each node has its pod CIDR from the pod network", async () => {
    const nodes = (
      await kubectlUntil(
        (out) => out.split("\n").every((l) => l.includes("=True=")),
        180_000,
        "get",
        "nodes",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=='Ready')].status}={.spec.podCIDR}{'\\n'}{end}",
      )
    )
      .split("\n")
      .sort();
    expect(nodes.map((l) => l.split("=").slice(0, 2).join("="))).toEqual(
      MACHINES.map((m) => `${m.name}=True`),
    );
    for (const l of nodes) expect(l.split("=")[2]).toMatch(/^10\.244\.\d+\.0\/24$/);
  }, 200_000);

  it("runs kubeadm's addons from the mirror: kube-proxy on each node, CoreDNS ready through the Service network", async () => {
    // Ready: CoreDNS reached the API server through its Service address, which kube-proxy programs.
    const ready = await kubectlUntil(
      (out) => (out.match(/^(coredns|kube-proxy)-\S+=true$/gm) ?? []).length === 6,
      150_000,
      "get",
      "pods",
      "-n",
      "kube-system",
      "-o",
      "jsonpath={range .items[*]}{.metadata.name}={.status.containerStatuses[0].ready}{'\\n'}{end}",
    );
    const addons = ready.split("\n").filter((l) => /^(coredns|kube-proxy)-/.test(l));
    expect(addons.map((l) => l.replace(/^(coredns|kube-proxy)-.*=/, "$1=")).sort()).toEqual([
      "coredns=true",
      "coredns=true",
      ...MACHINES.map(() => "kube-proxy=true"),
    ]);
  }, 170_000);

  let vip = "";
  let created = 0;

  it("deploys PortableCluster on it with pulumi up: flannel, the LB pods on the LB nodes, a reflector, the demo app", async () => {
    const flannel = labImage("flannel").ref;
    stack = await TestStack.create({
      program: repoRoot(),
      config: {
        "portable-lb:environment": {
          kind: "kubeconfig",
          kubeconfig: hostKubeconfig,
          platform: "onprem",
          bgp: { routers: [CLIENT] },
        },
        "portable-lb:network": {
          nodeCidr: "192.168.79.0/24",
          ...network,
          vipPools: [{ name: "web", cidr: VIP_POOL }],
        },
        "portable-lb:loadBalancer": {
          replicas: 2,
          image: builtLbImage().ref,
          bgp: { asn: 64512 },
          routeReflectors: [{ node: "w-1", address: W1 }],
          // What OnpremCluster's environment defaults to (defaultForwarding).
          dataPlane: { mode: "dsr" },
        },
        // The site's mirror, and the machines' own CNI configuration (containerd's template): flannel's
        // CNI plugin cannot be built here (README, flannel).
        "portable-lb:flannel": {
          version: flannel.slice(flannel.lastIndexOf(":") + 1),
          images: { repository: flannel.slice(0, flannel.lastIndexOf(":")) },
          installCni: false,
        },
        "portable-lb:demoApp": { replicas: 2 },
      },
    });
    // The engine waits for every DaemonSet and Deployment to be ready (no skipAwait).
    const up = await stack.stack.up({ onOutput: () => {} });
    expect(up.summary.result).toBe("succeeded");
    created = up.summary.resourceChanges?.["create"] ?? 0;
    vip = up.outputs["demoVip"]!.value as string;
    expect(vip).toMatch(/^10\.1\.79\.\d+$/);
    // flannel host-gw: every node routes each other node's pod CIDR to that node's address.
    const cidrs = Object.fromEntries(
      (
        await kubectl(
          "get",
          "nodes",
          "-o",
          "jsonpath={range .items[*]}{.metadata.name}={.spec.podCIDR}{'\\n'}{end}",
        )
      )
        .split("\n")
        .map((l) => l.split("=") as [string, string]),
    );
    for (const m of MACHINES) {
      const routes = (await machine[m.name].spec.ns.run("ip", ["-4", "route", "show"])).split("\n");
      for (const other of MACHINES.filter((o) => o !== m))
        expect(routes).toContainEqual(
          expect.stringMatching(new RegExp(`^${cidrs[other.name]} via ${other.address} `)),
        );
    }
    const where = (namespace: string, selector: string) =>
      kubectl(
        "get",
        "pods",
        "-n",
        namespace,
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.spec.nodeName}={.status.phase}{'\\n'}{end}",
      ).then((out) => out.split("\n").sort());
    expect(await where(DEFAULT_LB_NAMESPACE, `app=${LB_APP_LABEL}`)).toEqual([
      "lb-1=Running",
      "lb-2=Running",
    ]);
  }, 900_000);

  it("gives the site's router the VIP from the reflector, with both LB nodes as equal next hops", async () => {
    const config = (await stack!.stack.outputs())["routerConfig"]!.value as string;
    router = await FrrRouter.start(client, config);
    let hops: string[] = [];
    await waitUntil(
      async () => {
        hops = (await routerNextHops(path, vip)).map((h) => h.gateway).sort();
        return hops.length === 2;
      },
      90_000,
      500,
    );
    expect(hops).toEqual([LB1, LB2]);
  }, 120_000);

  it("serves the VIP to a client outside the site through both LB nodes, from both backends", async () => {
    const backends = (
      await kubectl(
        "get",
        "pods",
        "-n",
        "demo",
        "-o",
        "jsonpath={range .items[*]}{.status.podIP}{'\\n'}{end}",
      )
    )
      .split("\n")
      .sort();
    expect(backends).toHaveLength(2);
    const spread = await curlSpread(path, vip, 40);
    expect(spread.errors).toEqual([]);
    expect(spread.failed).toBe(0);
    expect(Object.keys(spread.lbNodes).sort()).toEqual(["lb-1", "lb-2"]);
    expect(Object.keys(spread.backends).sort()).toEqual(backends);
    // Direct server return: the worker's node agent prepared both backend pods for the VIP.
    const metrics = await client.run("curl", [
      "-sS",
      "--max-time",
      "5",
      `http://${W1}:9152/metrics` /* ports.nodeAgent, its default */,
    ]);
    expect(metrics).toMatch(/^portable_lb_dsr_backend_pods 2$/m);
    expect(metrics).toMatch(/^portable_lb_dsr_vips 1$/m);
  }, 180_000);

  it("previews no changes on the running cluster: no perpetual diff against real kubelets", async () => {
    const preview = await stack!.stack.preview({ color: "never" });
    expect(created).toBeGreaterThan(20);
    expect(preview.changeSummary).toEqual({ same: created });
  }, 180_000);

  it("removes everything on destroy: the LB pods stop, the router loses the VIP, the namespaces go", async () => {
    const destroy = await stack!.stack.destroy({ color: "never", onOutput: () => {} });
    expect(destroy.summary.result).toBe("succeeded");
    expect(destroy.summary.resourceChanges).toEqual({ delete: created });
    let hops = -1;
    await waitUntil(async () => (hops = (await routerNextHops(path, vip)).length) === 0, 60_000, 500);
    expect(hops).toBe(0);
    const left = async () =>
      (await kubectl("get", "namespaces", "-o", "name"))
        .split("\n")
        .filter((n) => /portable-lb|flannel|demo/.test(n));
    await waitUntil(async () => (await left()).length === 0, 120_000, 1_000);
    expect(await left()).toEqual([]);
  }, 300_000);

  it("stops at its first check when run again: the machine is already part of the cluster", async () => {
    const again = await ssh(LB1, RUN_SCRIPT);
    expect(again.stdout).toContain("portable-lb: lb-1 is already part of the cluster");
    expect(again.code).toBe(0);
  });

  it("changes nothing of the host's /etc, /var/lib or kernel settings", () => {
    expect(hostState()).toEqual(hostBefore);
    for (const m of Object.values(machine)) expect(m.running()).toBe(true);
  });

  it("leaves no process, cgroup or file of the machines once stopped", async () => {
    for (const m of Object.values(machine)) {
      const processes = [...m.processes];
      await m.stop();
      expect(processes.map((p) => p.name)).toEqual([
        "mount-namespace",
        "sshd",
        "containerd",
        "kubelet-service",
      ]);
      expect(processes.filter((p) => runs(p.pid, p.marker))).toEqual([]);
      expect(existsSync(m.spec.dir)).toBe(false);
      expect(existsSync(join("/sys/fs/cgroup/memory", m.layout.cgroupRoot))).toBe(false);
    }
  }, 120_000);
});
