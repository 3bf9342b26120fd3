// The onprem bootstrap for real, on two lab machines (test/harness/onprem/sshLabMachine.ts): sshd in
// lab network namespaces, each machine with its own /etc, /var/lib, /run and cgroups, prepared as a
// site's operator would (containerd, the pinned kubeadm/kubelet/kubectl, kubeadm's images in its
// containerd because no registry is reachable, a kubeadm patch with its kubelet settings). Over real
// SSH, with OnpremCluster's very commands, the scripts the renderer gives the control plane and an
// LB node are copied and run: kubeadm init makes a real control plane (etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler as static pods under containerd and runc), the LB node
// joins it with the bootstrap token and the CA hash, and the admin kubeconfig made from the cluster
// CA (as OnpremCluster makes it, without SSH) drives the cluster. This host's cgroups are v1, so the
// environment says machines.cgroupV1. Nothing of the host's /etc, sysctls or apt changes.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_LB_NODE_SELECTOR } from "@portable-lb/core";
import {
  CONTROL_PLANE_IMAGE_REPOSITORY,
  NetnsLab,
  controlPlaneImages,
  issueClientCert,
  kubeProxyConfig,
  runs,
  waitUntil,
  type LabNamespace,
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
  testCredentialsScript,
} from "../../packages/providers/src/bootstrap/__fixtures__/testCredentials.ts";
import { MACHINE_KUBEADM_PATCHES, SshLabMachine } from "../harness/onprem/sshLabMachine.ts";

const CLIENT = "192.168.79.1";
const CP = "192.168.79.10";
const LB = "192.168.79.11";
const network = { podCidr: "10.244.0.0/16", serviceCidr: "10.96.0.0/16" };
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
const machine: Record<"cp" | "lb-1", SshLabMachine> = {} as never;
let keys: string;
let kubeconfig: string;
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

const scriptFor = (name: string, role: "control-plane" | "lb", address: string) =>
  testCredentialsScript(
    { name, role, address },
    { controlPlaneAddress: CP, apiServerCertSans: [CP], network, machines },
  );

beforeAll(async () => {
  keys = mkdtempSync(join(tmpdir(), "plb-onprem-keys-"));
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", join(keys, "id_ed25519")]);
  lab = await NetnsLab.create("onprem");
  client = await lab.namespace("client");
  // One segment, as a site's node network: the client (where pulumi runs) and the machines.
  const segment = await lab.bridge(client, "nodes", `${CLIENT}/24`);
  const authorizedKey = readFileSync(join(keys, "id_ed25519.pub"), "utf8");
  const images = controlPlaneImages();
  const known: string[] = [];
  for (const [name, address] of [
    ["cp", CP],
    ["lb-1", LB],
  ] as const) {
    const ns = await lab.namespace(name);
    await lab.attach(segment, ns, `${address}/24`);
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
  kubeconfig = join(keys, "admin.kubeconfig");
  writeFileSync(
    kubeconfig,
    renderAdminKubeconfig({
      clusterName: "plb",
      server: `https://${CP}:6443`,
      caCertPem: TEST_CA_CERT,
      clientCertPem: readFileSync(admin.cert, "utf8"),
      clientKeyPem: readFileSync(admin.key, "utf8"),
    }),
    { mode: 0o600 },
  );
}, 600_000);

afterAll(async () => {
  for (const m of Object.values(machine)) await m?.stop();
  await lab?.destroy();
  rmSync(keys, { recursive: true, force: true });
}, 120_000);

describe("the onprem bootstrap over SSH on lab machines", () => {
  let init: Awaited<ReturnType<typeof ssh>>;

  it("copies the renderer's script with OnpremCluster's command: root-only, where cloud-init keeps it", async () => {
    const script = scriptFor("cp", "control-plane", CP);
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
      nodes: [
        { ...node, hostKey: machine.cp.hostKey },
        { ...node, name: "lb-1", host: LB, address: LB, role: "lb" },
      ],
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

  it("joins the LB node with the bootstrap token and the CA hash: labelled as an LB node", async () => {
    const copy = await ssh(LB, COPY_SCRIPT, { input: scriptFor("lb-1", "lb", LB) });
    expect(copy.code).toBe(0);
    const join_ = await ssh(LB, RUN_SCRIPT, { timeoutMs: 300_000 });
    const output = join_.stdout + join_.stderr;
    expect(output).not.toMatch(/\[ERROR /);
    expect(output).toContain("This node has joined the cluster");
    expect(output).toContain("portable-lb: lb-1 joined the cluster");
    expect(join_.code).toBe(0);
    const [key, value] = Object.entries(DEFAULT_LB_NODE_SELECTOR)[0]!;
    const lbNodes = await kubectlUntil(
      (out) => out !== "",
      60_000,
      "get",
      "nodes",
      "-l",
      `${key}=${value}`,
      "-o",
      "name",
    );
    expect(lbNodes).toBe("node/lb-1");
  }, 330_000);

  it("brings both nodes Ready: the kubelets run, each node has its pod CIDR from the pod network", async () => {
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
    expect(nodes.map((l) => l.split("=").slice(0, 2).join("="))).toEqual(["cp=True", "lb-1=True"]);
    for (const l of nodes) expect(l.split("=")[2]).toMatch(/^10\.244\.\d+\.0\/24$/);
  }, 200_000);

  it("runs kubeadm's addons from the mirror: kube-proxy on each node, CoreDNS ready through the Service network", async () => {
    // Ready: CoreDNS reached the API server through its Service address, which kube-proxy programs.
    const ready = await kubectlUntil(
      (out) => (out.match(/^(coredns|kube-proxy)-\S+=true$/gm) ?? []).length === 4,
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
      "kube-proxy=true",
      "kube-proxy=true",
    ]);
  }, 170_000);

  it("stops at its first check when run again: the machine is already part of the cluster", async () => {
    const again = await ssh(LB, RUN_SCRIPT);
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
