// The control-plane images the onprem environment's machines run kubeadm with (no registry is
// reachable from them; scripts/bootstrap/images.sh builds the images): named as kubeadm lists them
// for imageRepository localhost/portable-lb, imported into a containerd of the test's, and run
// through its runc shim as a kubelet runs kubeadm's static pods and kube-proxy's DaemonSet, each
// command by the name kubeadm's manifests give it (`etcd`, `kube-apiserver`, ... found on the
// image's PATH; `/usr/local/bin/kube-proxy`). etcd and kube-apiserver then serve kubeadm's probes
// in the test's namespace, the API server storing in that etcd.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CONTROL_PLANE_IMAGE_REPOSITORY,
  controlPlaneImages,
  labImage,
  NetnsLab,
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
  for (const id of detached) {
    await containerd.ctr(["task", "kill", "--signal", "SIGKILL", id]);
    await waitUntil(
      async () => !(await containerd.ctr(["task", "ls", "--quiet"])).stdout.split("\n").includes(id),
      10_000,
    );
    await containerd.ctr(["task", "delete", id]);
    await containerd.ctr(["container", "delete", id]);
  }
  await containerd?.stop();
  await lab?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
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
    // coredns is the cluster's addon and pause the node's sandbox image: not ours to build here.
    expect(wanted.filter((ref) => !/\/(coredns|pause):/.test(ref)).sort()).toEqual([...ours].sort());
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

  it("etcd and kube-apiserver serve kubeadm's probes, the API server storing in that etcd", async () => {
    // kubeadm's hostPath volumes: etcd's data, the API server's service-account keys.
    const etcdData = join(dir, "etcd-data");
    const pki = join(dir, "pki");
    mkdirSync(etcdData, { mode: 0o700 });
    mkdirSync(pki);
    execFileSync("openssl", ["genrsa", "-out", join(pki, "sa.key"), "2048"], { stdio: "ignore" });
    execFileSync("openssl", ["rsa", "-in", join(pki, "sa.key"), "-pubout", "-out", join(pki, "sa.pub")], {
      stdio: "ignore",
    });
    // kubeadm's etcd flags, on plain HTTP (the images, not kubeadm's certificates, are under test).
    const etcdLog = await start(
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
      { [etcdData]: "/var/lib/etcd" },
    );
    // kubeadm's etcd probes: GET http://127.0.0.1:2381/readyz and /livez.
    const etcdReady = await waitUntil(
      async () => (await get("http://127.0.0.1:2381/readyz")).code === "200",
      30_000,
      250,
    );
    if (!etcdReady)
      throw new Error(`etcd is not ready in 30 s:\n${readFileSync(etcdLog, "utf8").slice(-2000)}`);
    expect(await get("http://127.0.0.1:2381/livez")).toEqual({ code: "200", body: "ok" });

    const apiLog = await start(
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
        "--service-cluster-ip-range=10.96.0.0/12",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file=/etc/kubernetes/pki/sa.pub",
        "--service-account-signing-key-file=/etc/kubernetes/pki/sa.key",
      ],
      { [pki]: "/etc/kubernetes/pki" },
    );
    // kubeadm's API server probe: GET https://<advertise address>:6443/readyz (then /livez).
    let readyz = { code: "", body: "" };
    const apiReady = await waitUntil(
      async () => (readyz = await get(`https://${NODE_IP}:6443/readyz?verbose`)).code === "200",
      60_000,
      500,
    );
    if (!apiReady)
      throw new Error(
        `kube-apiserver is not ready in 60 s (/readyz: ${readyz.code} ${readyz.body}):\n${readFileSync(apiLog, "utf8").slice(-3000)}`,
      );
    expect(await get(`https://${NODE_IP}:6443/livez`)).toEqual({ code: "200", body: "ok" });
    // It stored in that etcd: the default namespace it makes at start-up, read with etcd's v3 API.
    const key = Buffer.from("/registry/namespaces/default").toString("base64");
    const range = await ns.exec("curl", [
      "-s",
      "-m",
      "5",
      "-d",
      JSON.stringify({ key, count_only: true }),
      "http://127.0.0.1:2379/v3/kv/range",
    ]);
    expect(JSON.parse(range.stdout)).toMatchObject({ count: "1" });
  }, 120_000);
});
