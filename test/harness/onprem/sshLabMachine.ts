// A machine as the onprem environment finds one, made of a lab network namespace: SSH reaches it,
// and the bootstrap script runs in it for real without touching this host's /etc, /usr or apt.
// - Its own mount namespace (held by a process in the network namespace, as a lab node's): /etc is an
//   overlay of the host's (the machine's writes land in its own folder), /var/lib and /run are its
//   own, and /usr/local/bin holds the pinned kubeadm, kubelet and kubectl, so the script finds the
//   machine prepared and skips its install step.
// - sshd on its address, root by key only, its host key made here (the test checks it as
//   OnpremCluster's hostKey does).
// - Prepared as the site's operator would for a machine that shares its host (the lab node's choices,
//   packages/lab/src/node): its own /var/log and /run, the kernel settings the kubelet checks shown
//   to it as set (protectKernelDefaults), its own cgroup root, containerd configured for runc on
//   cgroupfs with the lab's pause image, the images kubeadm runs imported (no registry is reachable),
//   and a kubeadm patch with the kubelet settings that go with all that (MACHINE_KUBEADM_PATCHES).
// - No systemd. The stand-ins for it: containerd started here, as `systemctl start containerd`
//   would on a prepared machine, and the kubelet run as kubeadm's packages run it (kubelet.service
//   with kubeadm's drop-in: the flags kubeadm writes, restarted whenever it exits).
// Every process is started and stopped by pid; stop() leaves no process, mount, cgroup or file.
import { execFileSync } from "node:child_process";
import {
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import {
  MOUNT_NAMESPACE_HOLDER,
  cgroupPids,
  cniTemplate,
  containerdConfig,
  createCgroupRoot,
  enterNode,
  execCommand,
  kubeletConfig,
  labImage,
  nodeLayout,
  prepareMountNamespace,
  removeCgroupRoot,
  requireCommand,
  runs,
  startDaemon,
  stopProcess,
  waitUntil,
  type LabImage,
  type LabNamespace,
  type NodeLayout,
} from "@portable-lb/lab";
import { KUBERNETES_VERSION } from "@portable-lb/providers";

/** Where the machine keeps its kubeadm patches: what the environment's machines.kubeadmPatches names. */
export const MACHINE_KUBEADM_PATCHES = "/etc/kubernetes/patches";

/** The machine's own paths as any machine has them (containerd's and the CNI's defaults). */
const MACHINE_PATHS = {
  containerdRoot: "/var/lib/containerd",
  containerdState: "/run/containerd",
  containerdSocket: "/run/containerd/containerd.sock",
  runcRoot: "/run/containerd/runc",
  cniConfDir: "/etc/cni/net.d",
  cniTemplate: "/etc/cni/portable-lb-template.conflist",
  cniIpamDir: "/var/lib/cni/networks",
};

/** The kubelet settings of a node that shares its machine (the lab's kubeletConfig.ts says why each). */
const SHARED_MACHINE_KUBELET_FIELDS = [
  "cgroupDriver",
  "cgroupRoot",
  "cgroupsPerQOS",
  "enforceNodeAllocatable",
  "failSwapOn",
  "protectKernelDefaults",
  "oomScoreAdj",
  "evictionHard",
  "imageGCHighThresholdPercent",
  "imageGCLowThresholdPercent",
] as const;

// kubelet.service with kubeadm's 10-kubeadm.conf drop-in (the kubeadm package's), as a loop: the
// flags kubeadm writes, and a restart whenever it exits (Restart=always). The first line names it.
const KUBELET_SERVICE = `# portable-lb-kubelet-service
while :; do
  if [ -f /var/lib/kubelet/config.yaml ]; then
    KUBELET_KUBEADM_ARGS=
    [ ! -f /var/lib/kubelet/kubeadm-flags.env ] || . /var/lib/kubelet/kubeadm-flags.env
    # shellcheck disable=SC2086
    kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
      --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml $KUBELET_KUBEADM_ARGS
  fi
  sleep 2
done`;

const BOOTSTRAP_FIX =
  "run scripts/bootstrap.sh (it installs openssh-server and containerd, and builds kubeadm)";

interface Started {
  name: string;
  pid: number;
  marker: string;
  log: string;
}

export interface SshLabMachineSpec {
  /** The node name it will have (its cgroup root and layout are named after it). */
  name: string;
  /** Keeps its cgroups apart from other labs' (e.g. the netns lab's id). */
  scope: string;
  ns: LabNamespace;
  /** Its address in `ns`, where sshd listens. */
  address: string;
  /** Its folder (removed by stop()). */
  dir: string;
  /** The public key (one line) that logs in as root. */
  authorizedKey: string;
  /** Imported into its containerd's CRI namespace before anything runs (the lab's pause image always). */
  images?: LabImage[];
  /** The registry kubeadm is told to take its images from (environment.machines.imageRepository). */
  imageRepository: string;
}

export class SshLabMachine {
  readonly processes: Started[] = [];
  /** Its SSH host key, as ssh-keyscan prints it without the host ("ssh-ed25519 AAAA..."). */
  hostKey = "";

  readonly spec: SshLabMachineSpec;
  readonly layout: NodeLayout;
  /** What kubeadm wants as the pod sandbox image, from this machine's image repository. */
  readonly sandboxImage: string;
  #holderPid = 0;

  private constructor(spec: SshLabMachineSpec) {
    this.spec = spec;
    this.layout = nodeLayout(spec.dir, spec.name, spec.scope);
    this.sandboxImage = kubeadmImages(spec.imageRepository).find((i) => /\/pause:/.test(i))!;
  }

  static async start(spec: SshLabMachineSpec): Promise<SshLabMachine> {
    const machine = new SshLabMachine(spec);
    try {
      await machine.#start();
      return machine;
    } catch (err) {
      await machine.stop();
      throw err;
    }
  }

  /** Where the machine's own changes to its /etc are (the overlay's upper folder). */
  get etcChanges(): string {
    return join(this.spec.dir, "etc-upper");
  }

  /** The machine's /var/lib, as seen from the host. */
  get varLib(): string {
    return join(this.spec.dir, "var-lib");
  }

  async #start(): Promise<void> {
    const { dir, ns, address } = this.spec;
    const sshd = requireCommand("sshd", BOOTSTRAP_FIX);
    const containerd = requireCommand("containerd", BOOTSTRAP_FIX);
    const bin = join(dir, "bin");
    for (const d of [bin, this.etcChanges, join(dir, "etc-work"), this.varLib, join(dir, "logs")])
      mkdirSync(d, { recursive: true });
    // The pinned binaries the tool cache built, where a prepared machine has them on PATH.
    for (const command of ["kubeadm", "kubelet", "kubectl"])
      symlinkSync(requireCommand(command, BOOTSTRAP_FIX), join(bin, command));

    const [holder, ...holderArgs] = MOUNT_NAMESPACE_HOLDER;
    const holderPid = this.#spawn(
      "mount-namespace",
      "nsenter",
      [`--net=/run/netns/${ns.netns}`, "--", holder!, ...holderArgs],
      "sleep infinity",
    );
    this.#holderPid = holderPid;
    // Its own /run (rshared) and /var/log, and the kernel settings the kubelet checks, shown as set.
    await prepareMountNamespace(this.layout, holderPid);
    const mount = async (...args: string[]) => {
      const r = await execCommand("nsenter", [`--mount=/proc/${holderPid}/ns/mnt`, "--", ...args]);
      if (r.code !== 0) throw new Error(`${ns.netns}: '${args.join(" ")}' failed: ${r.stderr.trim()}`);
    };
    this.#prepare();
    await mount(
      "mount",
      "-t",
      "overlay",
      "overlay",
      "-o",
      `lowerdir=/etc,upperdir=${this.etcChanges},workdir=${join(dir, "etc-work")}`,
      "/etc",
    );
    await mount("mount", "--bind", this.varLib, "/var/lib");
    await mount("mount", "--bind", bin, "/usr/local/bin");
    await mount("mkdir", "-m", "0755", "/run/sshd");

    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", join(dir, "host_key")]);
    this.hostKey = readFileSync(join(dir, "host_key.pub"), "utf8").trim();
    writeFileSync(join(dir, "authorized_keys"), `${this.spec.authorizedKey.trim()}\n`, { mode: 0o600 });
    const config = join(dir, "sshd_config");
    writeFileSync(
      config,
      [
        `ListenAddress ${address}:22`,
        `HostKey ${join(dir, "host_key")}`,
        `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PidFile none",
        // The key files are in a test folder, not a home folder sshd would check the modes of.
        "StrictModes no",
        "",
      ].join("\n"),
    );
    const enter = enterNode(ns.netns, holderPid);
    this.#spawn("sshd", enter[0]!, [...enter.slice(1), sshd, "-D", "-e", "-f", config], "sshd");
    // The stand-ins for systemd: containerd started as its unit would start it, and the kubelet's
    // service, which waits for kubeadm to write its configuration.
    this.#spawn("containerd", enter[0]!, [...enter.slice(1), containerd], "containerd");
    const socket = await waitUntil(
      async () => (await ns.exec("ss", ["-Hltn", "sport = :22"])).stdout.trim() !== "" && this.running(),
      10_000,
      50,
    );
    if (!socket) throw this.#failed("sshd did not listen on port 22 within 10 s");
    const cri = await waitUntil(
      async () =>
        (
          await execCommand("nsenter", [
            `--mount=/proc/${holderPid}/ns/mnt`,
            "--",
            "ctr",
            "--address",
            "/run/containerd/containerd.sock",
            "version",
          ])
        ).code === 0,
      30_000,
      200,
    );
    if (!cri) throw this.#failed("containerd did not answer on /run/containerd/containerd.sock within 30 s");
    await this.#importImages();
    createCgroupRoot(this.layout.cgroupRoot);
    this.#spawn(
      "kubelet-service",
      enter[0]!,
      [...enter.slice(1), "bash", "-c", KUBELET_SERVICE],
      "portable-lb-kubelet-service",
    );
  }

  /** A command in the machine (its network and mount namespaces), as root on it would run it. */
  exec(command: string[], timeoutMs = 30_000): ReturnType<typeof execCommand> {
    const enter = enterNode(this.spec.ns.netns, this.#holderPid);
    return execCommand(enter[0]!, [...enter.slice(1), ...command], { timeoutMs });
  }

  /**
   * The images, and the lab's pause image under the name kubeadm gives the pod sandbox image: the
   * same source (Kubernetes' build/pause at this release, whose upstream image is that tag).
   */
  async #importImages(): Promise<void> {
    const ctr = (...args: string[]) =>
      this.exec(["ctr", "--namespace", "k8s.io", "images", ...args], 300_000).then((r) => {
        if (r.code !== 0) throw this.#failed(`'ctr images ${args.join(" ")}' failed: ${r.stderr.trim()}`);
        return r.stdout;
      });
    const archives = new Set([labImage("pause"), ...(this.spec.images ?? [])].map((i) => i.archive));
    for (const archive of archives) await ctr("import", archive);
    await ctr("tag", labImage("pause").ref, this.sandboxImage);
  }

  /** The operator's preparation, in the machine's own /etc: containerd's configuration and the kubelet patch. */
  #prepare(): void {
    const etc = this.etcChanges;
    const layout = { ...this.layout, ...MACHINE_PATHS };
    const cniBinDir = process.env["PORTABLE_LB_CNI_BIN"];
    if (!cniBinDir)
      throw new Error(`PORTABLE_LB_CNI_BIN is unset: ${BOOTSTRAP_FIX}, with scripts/toolenv.sh sourced`);
    mkdirSync(join(etc, "containerd"), { recursive: true });
    writeFileSync(
      join(etc, "containerd", "config.toml"),
      containerdConfig({
        layout,
        sandboxImage: this.sandboxImage,
        cniBinDir,
      }),
    );
    mkdirSync(join(etc, "cni"), { recursive: true });
    writeFileSync(join(etc, "cni", "portable-lb-template.conflist"), cniTemplate(layout));
    const lab = JSON.parse(kubeletConfig({ layout, clientCaFile: "" })) as Record<string, unknown>;
    const patch = Object.fromEntries(SHARED_MACHINE_KUBELET_FIELDS.map((f) => [f, lab[f]]));
    const patches = join(etc, relative("/etc", MACHINE_KUBEADM_PATCHES));
    mkdirSync(patches, { recursive: true });
    writeFileSync(join(patches, "kubeletconfiguration+merge.json"), JSON.stringify(patch, null, 2));
  }

  /** `marker`: in its command line once nsenter has exec'd it (guards against a recycled pid). */
  #spawn(name: string, command: string, args: string[], marker: string): number {
    const log = join(this.spec.dir, "logs", `${name}.log`);
    const pid = startDaemon({ name, command, args, logFile: log });
    this.processes.push({ name, pid, marker, log });
    return pid;
  }

  #failed(what: string): Error {
    const logs = this.processes.map((p) => `--- ${p.name}:\n${readTail(p.log)}`).join("\n");
    return new Error(`${this.spec.ns.netns}: ${what}\n${logs}`);
  }

  /** Whether sshd and containerd (and the mount namespace's holder) all run. */
  running(): boolean {
    return this.processes.every((p) => runs(p.pid, p.marker));
  }

  /**
   * Stops everything: the kubelet's service and every process in the machine's mount namespace (the
   * kubelet, containerd and its shims, sshd's sessions), the pods (by its cgroups), then sshd,
   * containerd and the holder (the mount namespace ends with it); removes its cgroups and folder.
   */
  async stop(): Promise<void> {
    const service = this.processes.find((p) => p.name === "kubelet-service");
    if (service) await stopProcess(service.pid, service.marker, 10_000);
    const mnt = this.#holderPid ? readMountNamespace(this.#holderPid) : undefined;
    const kept = new Set(this.processes.map((p) => p.pid));
    const machine = mnt ? pidsIn(mnt).filter((p) => !kept.has(p)) : [];
    for (const pid of [...machine, ...cgroupPids(this.layout.cgroupRoot)]) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
    for (const p of [...this.processes].reverse()) await stopProcess(p.pid, p.marker, 10_000);
    await removeCgroupRoot(this.layout.cgroupRoot);
    rmSync(this.spec.dir, { recursive: true, force: true });
  }
}

function readMountNamespace(pid: number | "self"): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/mnt`);
  } catch {
    return undefined;
  }
}

/** The images kubeadm runs, from `repository`, as it lists them. */
export function kubeadmImages(repository: string): string[] {
  return execFileSync(
    "kubeadm",
    [
      "config",
      "images",
      "list",
      "--kubernetes-version",
      `v${KUBERNETES_VERSION}`,
      "--image-repository",
      repository,
    ],
    { encoding: "utf8" },
  )
    .trim()
    .split("\n");
}

/** Every process in mount namespace `mnt`. */
function pidsIn(mnt: string): number[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .map(Number)
    .filter((pid) => readMountNamespace(pid) === mnt);
}

function readTail(file: string): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-20).join("\n");
  } catch {
    return "(no log)";
  }
}
