// The onprem bootstrap for real, on a lab machine (test/harness/onprem/sshLabMachine.ts): sshd in a
// lab network namespace with the machine's own /etc, /var/lib and /run, and from a second
// namespace, over real SSH, the control plane's script as OnpremCluster renders it, copied and run
// with OnpremCluster's very commands. The script finds the machine prepared (no install), writes the
// CA and kubeadm's configuration into the machine's own /etc, sets its kernel settings in the
// machine's network namespace, and runs kubeadm init, whose preflight checks pass but one: this
// host's cgroup v1 hierarchy, which kubelet 1.35 refuses unless told (see the README's onprem
// section). Nothing of the host's /etc, sysctls or apt changes.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NetnsLab, runs, type LabNamespace } from "@portable-lb/lab";
import { COPY_SCRIPT, KUBERNETES_VERSION, RUN_SCRIPT, onpremEnvironmentSchema } from "@portable-lb/providers";
import {
  TEST_CA_CERT,
  TEST_CA_KEY,
  testCredentialsScript,
} from "../../packages/providers/src/bootstrap/__fixtures__/testCredentials.ts";
import { SshLabMachine } from "../harness/onprem/sshLabMachine.ts";

const ADDRESS = "192.168.79.10";
const CLIENT = "192.168.79.1";
const network = { podCidr: "10.244.0.0/16", serviceCidr: "10.96.0.0/16" };
/** Host files the script would write or rewrite on a machine of its own. */
const HOST_FILES = ["/etc/fstab", "/etc/sysctl.d", "/etc/modules-load.d", "/etc/apt/sources.list.d"];
const hostState = () => ({
  files: HOST_FILES.map((f) => [f, existsSync(f) ? statSync(f).mtimeMs : undefined]),
  kubernetes: existsSync("/etc/kubernetes") ? readdirSync("/etc/kubernetes") : undefined,
  varLibPortableLb: existsSync("/var/lib/portable-lb"),
  forwarding: readFileSync("/proc/sys/net/ipv4/ip_forward", "utf8"),
});
const cgroupV1 = !existsSync("/sys/fs/cgroup/cgroup.controllers");

let lab: NetnsLab;
let client: LabNamespace;
let cp: LabNamespace;
let machine: SshLabMachine;
let keys: string;
const hostBefore = hostState();

/** ssh from the client namespace as OnpremCluster's connection would: root, the key, the host key checked. */
const ssh = (command: string, opts: { input?: string; timeoutMs?: number } = {}) =>
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
      `root@${ADDRESS}`,
      command,
    ],
    { timeoutMs: opts.timeoutMs ?? 30_000, ...(opts.input !== undefined && { input: opts.input }) },
  );

beforeAll(async () => {
  keys = mkdtempSync(join(tmpdir(), "plb-onprem-keys-"));
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", join(keys, "id_ed25519")]);
  lab = await NetnsLab.create("onprem");
  client = await lab.namespace("client");
  cp = await lab.namespace("cp");
  await lab.link(client, cp, { a: `${CLIENT}/24`, b: `${ADDRESS}/24` });
  machine = await SshLabMachine.start({
    ns: cp,
    address: ADDRESS,
    dir: join(lab.dir, "machine-cp"),
    authorizedKey: readFileSync(join(keys, "id_ed25519.pub"), "utf8"),
  });
  writeFileSync(join(keys, "known_hosts"), `${ADDRESS} ${machine.hostKey}\n`);
}, 60_000);

afterAll(async () => {
  await machine?.stop();
  await lab?.destroy();
  rmSync(keys, { recursive: true, force: true });
});

describe("the onprem bootstrap over SSH on a lab machine", () => {
  const script = testCredentialsScript(
    { name: "cp", role: "control-plane", address: ADDRESS },
    { controlPlaneAddress: ADDRESS, apiServerCertSans: [ADDRESS], network },
  );
  let run: Awaited<ReturnType<typeof ssh>>;

  it("copies the renderer's script with OnpremCluster's command: root-only, where cloud-init keeps it", async () => {
    const copy = await ssh(COPY_SCRIPT, { input: script });
    expect(copy.stderr).toBe("");
    expect(copy.code).toBe(0);
    const copied = join(machine.varLib, "portable-lb", "bootstrap.sh");
    expect(readFileSync(copied, "utf8")).toBe(script);
    expect(statSync(copied).mode & 0o777).toBe(0o700);
    expect(statSync(join(machine.varLib, "portable-lb")).mode & 0o777).toBe(0o700);
    // Its sshd's host key is one the environment takes (environment.nodes[].hostKey).
    const node = { name: "cp", host: ADDRESS, address: ADDRESS, role: "control-plane" };
    const parsed = onpremEnvironmentSchema.safeParse({
      kind: "onprem",
      nodes: [
        { ...node, hostKey: machine.hostKey },
        { ...node, name: "lb-1", host: "lb-1", address: CLIENT, role: "lb" },
      ],
    });
    expect(parsed.error).toBeUndefined();
  });

  it("runs it with OnpremCluster's command: prepared machine, the CA and kubeadm's configuration in its own /etc", async () => {
    run = await ssh(RUN_SCRIPT, { timeoutMs: 180_000 });
    const output = run.stdout + run.stderr;
    expect(run.timedOut).toBe(false);
    // The install step is skipped: the pinned binaries are there, no package repository is asked.
    expect(output).toContain(`portable-lb: cp has containerd and Kubernetes ${KUBERNETES_VERSION} already`);
    expect(existsSync(join(machine.etcChanges, "apt"))).toBe(false);
    const pki = join(machine.etcChanges, "kubernetes", "pki");
    expect(readFileSync(join(pki, "ca.crt"), "utf8").trimEnd()).toBe(TEST_CA_CERT.trimEnd());
    expect(readFileSync(join(pki, "ca.key"), "utf8").trimEnd()).toBe(TEST_CA_KEY.trimEnd());
    expect(statSync(join(pki, "ca.key")).mode & 0o777).toBe(0o600);
    const kubeadmConfig = join(machine.etcChanges, "kubernetes", "portable-lb-kubeadm.yaml");
    expect(statSync(kubeadmConfig).mode & 0o777).toBe(0o600);
    // Written by bash from the heredoc, it is what kubeadm itself accepts.
    const check = execFileSync("kubeadm", ["config", "validate", "--config", kubeadmConfig], {
      encoding: "utf8",
    });
    expect(check.trim()).toBe("ok");
    expect(readFileSync(kubeadmConfig, "utf8")).toContain(`advertiseAddress: ${ADDRESS}`);
    expect(readFileSync(join(machine.etcChanges, "sysctl.d", "90-portable-lb.conf"), "utf8")).toContain(
      "net.ipv4.ip_forward = 1",
    );
    // The kernel settings took effect in the machine's network namespace.
    expect((await cp.sysctl("net.ipv4.ip_forward")).trim()).toBe("1");
    expect((await cp.sysctl("net.bridge.bridge-nf-call-iptables")).trim()).toBe("1");
  }, 200_000);

  it("gets kubeadm init through its preflight checks but this host's cgroup v1", () => {
    const output = run.stdout + run.stderr;
    expect(output).toContain(`[init] Using Kubernetes version: v${KUBERNETES_VERSION}`);
    expect(output).toContain("[preflight] Running pre-flight checks");
    const fatal = [...output.matchAll(/\[ERROR ([^\]]+)\]/g)].map((m) => m[1]);
    // The CRI socket (containerd), ports, swap, ip_forward and bridge-nf-call-iptables all pass.
    expect(fatal).toEqual(cgroupV1 ? ["SystemVerification"] : []);
    if (cgroupV1) {
      expect(output).toContain("cgroups v1 support is deprecated");
      expect(run.code).not.toBe(0);
    }
  });

  it("changes nothing of the host's /etc, /var/lib or kernel settings", () => {
    expect(hostState()).toEqual(hostBefore);
    expect(machine.running()).toBe(true);
  });

  it("leaves no process or file of the machine once stopped", async () => {
    const processes = [...machine.processes];
    await machine.stop();
    expect(processes.map((p) => p.name)).toEqual(["mount-namespace", "sshd", "containerd"]);
    expect(processes.filter((p) => runs(p.pid, p.marker))).toEqual([]);
    expect(existsSync(machine.spec.dir)).toBe(false);
  });
});
