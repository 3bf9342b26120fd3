// The control-plane images the onprem environment's machines run kubeadm with (no registry is
// reachable from them; scripts/bootstrap/images.sh builds the images): named as kubeadm lists them
// for imageRepository localhost/portable-lb, imported into a containerd of the test's, and run
// through its runc shim as a kubelet runs kubeadm's static pods and kube-proxy's DaemonSet, each
// command by the name kubeadm's manifests give it (`etcd`, `kube-apiserver`, ... found on the
// image's PATH; `/usr/local/bin/kube-proxy`). Then the control plane runs from them in the test's
// namespace with kubeadm's flags and hostPath folders, each serving kubeadm's probes: etcd, the API
// server storing in it, the controller manager and scheduler taking their leases through it, and
// kube-proxy writing the API server's Service into the namespace's nftables with the image's nft.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CONTROL_PLANE_IMAGE_REPOSITORY,
  controlPlaneImages,
  kubeProxyConfig,
  labImage,
  makePki,
  NetnsLab,
  renderKubeconfig,
  waitUntil,
  type ExecResult,
  type LabNamespace,
} from "@portable-lb/lab";
import { TestContainerd } from "../harness/oci/testContainerd.ts";

/** The version the bootstrap's kubeadm deploys ("v1.35.4"): the control plane's. */
const KUBERNETES_VERSION = execFileSync("kubeadm", ["version", "-o", "short"], { encoding: "utf8" }).trim();
const NODE_IP = "10.0.0.10";

let lab: NetnsLab;
let ns: LabNamespace;
let dir: string;
let containerd: TestContainerd;
/** Containers started detached, removed by id at the end. */
const detached: string[] = [];

/** `ctr run --rm IMAGE ID ARGS...`: ARGS replace the image's entrypoint as a pod's `command` does. */
function run(name: Parameters<typeof labImage>[0], args: string[]): Promise<ExecResult> {
  return containerd.run(["--rm", labImage(name).ref, `${name}-${args[0]!.replace(/\W/g, "")}`, ...args]);
}

/**
 * Starts a container on the namespace's network (a static pod's hostNetwork), its output to a log
 * file, with host folders bound as kubeadm's hostPath volumes (host path -> container path).
 */
async function start(
  name: Parameters<typeof labImage>[0],
  args: string[],
  mounts: Record<string, string>,
  capabilities: string[] = [],
): Promise<string> {
  const log = join(dir, `${name}.log`);
  const binds = Object.entries(mounts).flatMap(([src, dst]) => [
    "--mount",
    `type=bind,src=${src},dst=${dst},options=rbind:rw`,
  ]);
  detached.push(name);
  const r = await containerd.run([
    "--detach",
    "--net-host",
    "--log-uri",
    `file://${log}`,
    ...binds,
    ...capabilities.flatMap((cap) => ["--cap-add", cap]),
    labImage(name).ref,
    name,
    ...args,
  ]);
  if (r.code !== 0) throw new Error(`ctr run ${name}: exit ${r.code}: ${r.stderr.trim()}`);
  return log;
}

/** An HTTP(S) GET from inside the namespace: the status code and body. */
async function get(url: string): Promise<{ code: string; body: string }> {
  const r = await ns.exec("curl", ["-sk", "-m", "5", "-w", "\n%{http_code}", url]);
  const lines = r.stdout.split("\n");
  return { code: lines.pop() ?? "", body: lines.join("\n").trim() };
}

beforeAll(async () => {
  lab = await NetnsLab.create("cp-images");
  ns = await lab.namespace("node");
  await ns.addAddress(`${NODE_IP}/32`, "lo");
  // Beside the lab, not in it: a kept lab folder holds logs, not unpacked images.
  dir = mkdtempSync(join(tmpdir(), "plb-cp-images-"));
  containerd = await TestContainerd.start(ns, join(dir, "containerd"), `plb-cp-images-${process.pid}`);
  for (const image of controlPlaneImages()) {
    const r = await containerd.ctr(["images", "import", image.archive], 120_000);
    if (r.code !== 0) throw new Error(`ctr images import ${image.archive}: ${r.stderr.trim()}`);
  }
}, 180_000);

afterAll(async () => {
  // By id: the task killed and deleted (--force), then its container.
  for (const id of detached) {
    await containerd.ctr(["task", "delete", "--force", id]);
    await containerd.ctr(["container", "delete", id]);
  }
  const left = containerd && (await containerd.ctr(["containers", "ls", "--quiet"])).stdout.trim();
  await containerd?.stop();
  await lab?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (left) throw new Error(`containers left in the test's containerd: ${left}`);
}, 60_000);

describe("the control-plane images", () => {
  it("are the ones kubeadm asks for with imageRepository localhost/portable-lb, as imported", async () => {
    const wanted = execFileSync(
      "kubeadm",
      [
        "config",
        "images",
        "list",
        "--kubernetes-version",
        KUBERNETES_VERSION,
        "--image-repository",
        CONTROL_PLANE_IMAGE_REPOSITORY,
      ],
      { encoding: "utf8" },
    )
      .split("\n")
      .filter(Boolean);
    const ours = controlPlaneImages().map((i) => i.ref);
    // pause is the node's sandbox image: the lab's own, which a machine tags with kubeadm's name.
    expect(wanted.filter((ref) => !/\/pause:/.test(ref)).sort()).toEqual([...ours].sort());
    const imported = (await containerd.ctr(["images", "ls", "--quiet"])).stdout.split("\n");
    expect(imported).toEqual(expect.arrayContaining(ours));
  });

  it.each(["kube-apiserver", "kube-controller-manager", "kube-scheduler"] as const)(
    "%s runs by its name, as kubeadm's static pod names it, at the bootstrap's version",
    async (name) => {
      const r = await run(name, [name, "--version"]);
      expect({ code: r.code, stdout: r.stdout.trim(), stderr: r.stderr }).toEqual({
        code: 0,
        stdout: `Kubernetes ${KUBERNETES_VERSION}`,
        stderr: "",
      });
    },
  );

  it("etcd runs by its name at the version kubeadm deploys", async () => {
    const r = await run("etcd", ["etcd", "--version"]);
    expect(r.code).toBe(0);
    const tag = labImage("etcd").ref.split(":").pop()!;
    expect(r.stdout).toContain(`etcd Version: ${tag.replace(/-\d+$/, "")}\n`);
    expect(r.stdout).toMatch(/^Git SHA: [0-9a-f]{7}$/m);
  });

  it("coredns runs at upstream's path as nonroot, at the version kubeadm deploys", async () => {
    const r = await run("coredns", ["/coredns", "-version"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`CoreDNS-${labImage("coredns").ref.split(":v").pop()!}\n`);
    // As upstream's image: its entrypoint, and distroless' nonroot user (port 53 by its capability).
    const { config } = JSON.parse(
      execFileSync("skopeo", ["inspect", "--config", `oci-archive:${labImage("coredns").archive}`], {
        encoding: "utf8",
      }),
    ) as { config: { User?: string; Entrypoint?: string[] } };
    expect(config).toMatchObject({ User: "65532:65532", Entrypoint: ["/coredns"] });
  });

  it("kube-proxy runs at upstream's path, with the netfilter tools its proxy modes exec", async () => {
    const proxy = await run("kube-proxy", ["/usr/local/bin/kube-proxy", "--version"]);
    expect(proxy.stdout.trim()).toBe(`Kubernetes ${KUBERNETES_VERSION}`);
    // ipset's --version asks the kernel too, which has no ip_set here: its help says its version.
    const tools: Record<string, [string, RegExp]> = {
      iptables: ["--version", /^iptables v[\d.]+ \(nf_tables\)$/m],
      "ip6tables-restore": ["--version", /^ip6tables-restore v[\d.]+ \(nf_tables\)$/m],
      nft: ["--version", /^nftables v[\d.]+/m],
      ipset: ["--help", /^ipset v[\d.]+/m],
      conntrack: ["--version", /^conntrack v[\d.]+/m],
    };
    for (const [tool, [flag, version]] of Object.entries(tools)) {
      const r = await run("kube-proxy", [tool, flag]);
      expect({ tool, code: r.code, out: r.stdout + r.stderr }).toEqual({
        tool,
        code: 0,
        out: expect.stringMatching(version),
      });
    }
  });
});

describe("the control plane from the images, as kubeadm runs it on a machine", () => {
  /** kubeadm's /etc/kubernetes: pki/ (the cluster's CA, serving and client certificates, service-account keys) and each component's kubeconfig. */
  let kubernetesDir: string;

  /** Waits for a probe kubeadm gives `name` to answer 200; fails with its answer and log. */
  async function serving(name: string, url: string, log: string, timeoutMs: number): Promise<void> {
    let last = { code: "", body: "" };
    if (!(await waitUntil(async () => (last = await get(url)).code === "200", timeoutMs, 250)))
      throw new Error(
        `${name}: ${url} answers ${last.code || "nothing"} ${last.body} after ${timeoutMs / 1000} s; its log ends:\n${readFileSync(log, "utf8").slice(-3000)}`,
      );
  }

  /** How many keys etcd holds under `key`, read with its v3 HTTP API. */
  async function stored(key: string): Promise<number> {
    const r = await ns.exec("curl", [
      "-s",
      "-m",
      "5",
      "-d",
      JSON.stringify({ key: Buffer.from(key).toString("base64"), count_only: true }),
      "http://127.0.0.1:2379/v3/kv/range",
    ]);
    return Number((JSON.parse(r.stdout) as { count?: string }).count ?? 0);
  }

  beforeAll(async () => {
    kubernetesDir = join(dir, "etc-kubernetes");
    const pkiDir = join(kubernetesDir, "pki");
    mkdirSync(pkiDir, { recursive: true });
    const components = ["kube-controller-manager", "kube-scheduler", "kube-proxy"];
    const pki = await makePki(
      pkiDir,
      [NODE_IP],
      [
        ...components.map((c) => ({ name: c, user: `system:${c}`, groups: [] })),
        // kubeadm's admin.conf user, for what the test does as the cluster's administrator.
        { name: "admin", user: "kubernetes-admin", groups: ["system:masters"] },
      ],
    );
    // kubeadm's controller-manager.conf and scheduler.conf, and kube-proxy's kubeconfig (here a
    // client certificate of user system:kube-proxy, where kubeadm gives its ServiceAccount's token).
    for (const c of components)
      writeFileSync(
        join(kubernetesDir, `${c.replace(/^kube-/, "")}.conf`),
        renderKubeconfig({
          server: `https://${NODE_IP}:6443`,
          caCertFile: pki.caCert,
          clientCertFile: pki.clients[c]!.cert,
          clientKeyFile: pki.clients[c]!.key,
          user: `system:${c}`,
        }),
      );
  });

  it("etcd serves kubeadm's probes from its hostPath data folder", async () => {
    const data = join(dir, "etcd-data");
    mkdirSync(data, { mode: 0o700 });
    // kubeadm's etcd flags, on plain HTTP (the images, not kubeadm's etcd certificates, are under test).
    const log = await start(
      "etcd",
      [
        "etcd",
        "--name=node",
        "--data-dir=/var/lib/etcd",
        "--listen-client-urls=http://127.0.0.1:2379",
        "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=node=http://127.0.0.1:2380",
        "--listen-metrics-urls=http://127.0.0.1:2381",
        "--snapshot-count=10000",
      ],
      { [data]: "/var/lib/etcd" },
    );
    await serving("etcd", "http://127.0.0.1:2381/readyz", log, 30_000);
    expect(await get("http://127.0.0.1:2381/livez")).toEqual({ code: "200", body: "ok" });
  }, 60_000);

  it("kube-apiserver serves kubeadm's probes, storing in that etcd", async () => {
    const log = await start(
      "kube-apiserver",
      [
        "kube-apiserver",
        `--advertise-address=${NODE_IP}`,
        "--secure-port=6443",
        "--etcd-servers=http://127.0.0.1:2379",
        // kubeadm's: RBAC lets anonymous probes read /livez and /readyz (system:public-info-viewer).
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--client-ca-file=/etc/kubernetes/pki/ca.crt",
        "--tls-cert-file=/etc/kubernetes/pki/apiserver.crt",
        "--tls-private-key-file=/etc/kubernetes/pki/apiserver.key",
        "--service-cluster-ip-range=10.96.0.0/12",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file=/etc/kubernetes/pki/service-account.pub",
        "--service-account-signing-key-file=/etc/kubernetes/pki/service-account.key",
      ],
      { [join(kubernetesDir, "pki")]: "/etc/kubernetes/pki" },
    );
    // kubeadm's probes: https://<advertise address>:6443/readyz, /livez.
    await serving("kube-apiserver", `https://${NODE_IP}:6443/readyz`, log, 60_000);
    expect(await get(`https://${NODE_IP}:6443/livez`)).toEqual({ code: "200", body: "ok" });
    // The default namespace it makes at start-up, in that etcd.
    expect(await stored("/registry/namespaces/default")).toBe(1);
  }, 90_000);

  it("kube-controller-manager and kube-scheduler serve kubeadm's probes and lead through it", async () => {
    const common = (conf: string) => [
      `--authentication-kubeconfig=/etc/kubernetes/${conf}`,
      `--authorization-kubeconfig=/etc/kubernetes/${conf}`,
      `--kubeconfig=/etc/kubernetes/${conf}`,
      "--bind-address=127.0.0.1",
      "--leader-elect=true",
    ];
    const cmLog = await start(
      "kube-controller-manager",
      [
        "kube-controller-manager",
        ...common("controller-manager.conf"),
        "--client-ca-file=/etc/kubernetes/pki/ca.crt",
        "--cluster-name=kubernetes",
        "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt",
        "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key",
        "--controllers=*,bootstrapsigner,tokencleaner",
        "--root-ca-file=/etc/kubernetes/pki/ca.crt",
        "--service-account-private-key-file=/etc/kubernetes/pki/service-account.key",
        "--use-service-account-credentials=true",
      ],
      { [kubernetesDir]: "/etc/kubernetes" },
    );
    const schedulerLog = await start("kube-scheduler", ["kube-scheduler", ...common("scheduler.conf")], {
      [kubernetesDir]: "/etc/kubernetes",
    });
    // kubeadm's probes: https://127.0.0.1:10257/healthz; https://127.0.0.1:10259/livez and /readyz.
    await serving("kube-controller-manager", "https://127.0.0.1:10257/healthz", cmLog, 60_000);
    await serving("kube-scheduler", "https://127.0.0.1:10259/readyz", schedulerLog, 30_000);
    expect(await get("https://127.0.0.1:10259/livez")).toEqual({ code: "200", body: "ok" });
    // Each took its leader lease through the API server, as its own user (RBAC's bootstrap roles).
    for (const c of ["kube-controller-manager", "kube-scheduler"])
      expect(
        await waitUntil(async () => (await stored(`/registry/leases/kube-system/${c}`)) === 1, 30_000, 500),
      ).toBe(true);
  }, 120_000);

  it("kube-proxy programs the API server's Service with the image's nft, as kubeadm's DaemonSet runs it", async () => {
    // The Node the kubelet would register, with the address kube-proxy takes as its own.
    const node = { apiVersion: "v1", kind: "Node", metadata: { name: "node" } };
    const created = await ns.exec("curl", [
      ...["-s", "-m", "5", "--cacert", join(kubernetesDir, "pki/ca.crt")],
      ...["--cert", join(kubernetesDir, "pki/admin.crt"), "--key", join(kubernetesDir, "pki/admin.key")],
      ...["-H", "Content-Type: application/json", "-w", "\n%{http_code}"],
      ...[
        "-d",
        JSON.stringify({ ...node, status: { addresses: [{ type: "InternalIP", address: NODE_IP }] } }),
      ],
      `https://${NODE_IP}:6443/api/v1/nodes`,
    ]);
    expect(created.stdout.split("\n").pop()).toBe("201");
    // kubeadm's kube-proxy volume (its ConfigMap) at /var/lib/kube-proxy; the lab's configuration
    // (nftables, nothing machine-wide); kubeadm's command. kubeadm's DaemonSet is privileged: here
    // it has the runtime's default capabilities and NET_ADMIN, which programming nftables takes.
    const config = join(dir, "kube-proxy");
    mkdirSync(config);
    writeFileSync(
      join(config, "config.conf"),
      kubeProxyConfig({
        nodeName: "node",
        kubeconfig: "/var/lib/kube-proxy/kubeconfig.conf",
        clusterCidr: "10.244.0.0/16",
      }),
    );
    writeFileSync(join(config, "kubeconfig.conf"), readFileSync(join(kubernetesDir, "proxy.conf")));
    const log = await start(
      "kube-proxy",
      ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=node"],
      { [config]: "/var/lib/kube-proxy" },
      ["CAP_NET_ADMIN"],
    );
    await serving("kube-proxy", "http://127.0.0.1:10256/healthz", log, 30_000);
    // The default/kubernetes Service (10.96.0.1:443) to the API server's endpoint, in the
    // namespace's nftables, as the image's nft wrote it.
    let table = "";
    const programmed = await waitUntil(
      async () => {
        table = (await ns.exec("nft", ["list", "table", "ip", "kube-proxy"])).stdout;
        return table.includes("10.96.0.1") && table.includes(`dnat to ${NODE_IP}:6443`);
      },
      30_000,
      500,
    );
    expect({ programmed, table: programmed ? "" : table }).toEqual({ programmed: true, table: "" });
  }, 90_000);
});
