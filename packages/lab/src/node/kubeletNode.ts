// A real Kubernetes node inside a lab network namespace: containerd (CRI, runc), the kubelet and
// kube-proxy, each started by pid with `nsenter` into the node's network and mount namespaces and
// stopped by pid. `stop()` leaves nothing behind: no process, cgroup, mount or file of the node.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execCommand } from "../netns/netnsLab.ts";
import {
  commandLine,
  findByMarker,
  lastLines,
  requireCommand,
  runs,
  startDaemon,
  stopProcess,
  waitUntil,
} from "../processes.ts";
import { containerdConfig, cniTemplate } from "./containerdConfig.ts";
import { kubeletConfig, type Taint } from "./kubeletConfig.ts";
import { kubeProxyConfig } from "./kubeProxyConfig.ts";
import { cgroupPids, createCgroupRoot, removeCgroupRoot } from "./nodeCgroups.ts";
import type { NodeLayout } from "./nodeLayout.ts";
import { enterNode, MOUNT_NAMESPACE_HOLDER, prepareMountNamespace } from "./nodeMountNamespace.ts";

const BOOTSTRAP_FIX =
  "run scripts/bootstrap.sh (it installs containerd and runc and builds the kubelet and kube-proxy)";
const CNI_BIN_ENV = "PORTABLE_LB_CNI_BIN";

export interface KubeletNodeSpec {
  layout: NodeLayout;
  /** The `ip netns` name of the node's network namespace (made and addressed by the caller). */
  netns: string;
  /** The node's address in that namespace: its InternalIP. */
  nodeIp: string;
  /** The control plane's CA certificate. */
  clientCaFile: string;
  /** The cluster's pod CIDR (kube-proxy's clusterCIDR). */
  clusterCidr: string;
  /** OCI archives to import into the node's containerd before the kubelet starts. */
  images: string[];
  /** The sandbox image's name (one of `images`). */
  sandboxImage: string;
  labels?: Record<string, string>;
  taints?: Taint[];
  /** Sysctls outside Kubernetes' safe set its pods may set. */
  allowedUnsafeSysctls?: string[];
  /** The cluster DNS Service's addresses (kubelet's clusterDNS). */
  clusterDns?: string[];
}

export interface NodeProcess {
  name: string;
  pid: number;
  /** In its command line while it runs: guards against a recycled pid. */
  marker: string;
  logFile: string;
  /** What started it (with the `nsenter` into the node's namespaces): what a restart runs again. */
  argv: string[];
}

export class KubeletNodeError extends Error {}

function kill(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // gone already
  }
}

export class KubeletNode {
  readonly layout: NodeLayout;
  readonly processes: NodeProcess[] = [];
  readonly #spec: KubeletNodeSpec | undefined;

  private constructor(layout: NodeLayout, spec?: KubeletNodeSpec) {
    this.#spec = spec;
    this.layout = layout;
  }

  /** A node started earlier (by another process, say), from its layout and recorded processes. */
  static attach(layout: NodeLayout, processes: NodeProcess[]): KubeletNode {
    const node = new KubeletNode(layout);
    node.processes.push(...processes);
    return node;
  }

  /**
   * Starts the node: its folders and configuration, cgroup root, mount namespace, containerd (with
   * the images imported), the kubelet and kube-proxy. The kubeconfigs (nodeCredentials.ts) must be
   * in place. Stops what it started if any step fails.
   */
  static async start(spec: KubeletNodeSpec): Promise<KubeletNode> {
    const node = new KubeletNode(spec.layout, spec);
    try {
      await node.#start();
      return node;
    } catch (err) {
      await node.stop();
      throw err;
    }
  }

  /**
   * Starts a node again whose mount namespace is gone with its processes (a crashed or rebooted
   * machine): what is left of them is stopped, and what lives only while a node runs (containerd's
   * and runc's state) is cleared, as a reboot's fresh /run would be. The images, the containers'
   * data and the kubelet's folder stay, so its pods come back as on a rebooted node.
   */
  static async restart(spec: KubeletNodeSpec, processes: NodeProcess[]): Promise<KubeletNode> {
    await KubeletNode.attach(spec.layout, processes).#halt();
    for (const dir of [spec.layout.containerdState, spec.layout.runcRoot])
      rmSync(dir, { recursive: true, force: true });
    return KubeletNode.start(spec);
  }

  async #start(): Promise<void> {
    const spec = this.#spec!;
    const { layout, nodeIp } = spec;
    const cniBin = process.env[CNI_BIN_ENV];
    if (!cniBin || !existsSync(join(cniBin, "bridge")))
      throw new KubeletNodeError(
        `node ${layout.name}: no CNI plugins at ${CNI_BIN_ENV}=${cniBin ?? ""}: ${BOOTSTRAP_FIX}`,
      );
    const kubelet = requireCommand("kubelet", BOOTSTRAP_FIX);
    const kubeProxy = requireCommand("kube-proxy", BOOTSTRAP_FIX);
    const containerd = requireCommand("containerd", BOOTSTRAP_FIX);
    requireCommand("runc", BOOTSTRAP_FIX);

    for (const dir of [
      layout.logs,
      layout.cniConfDir,
      layout.containerdRoot,
      layout.kubeletRoot,
      layout.podLogs,
    ])
      mkdirSync(dir, { recursive: true });
    writeFileSync(
      layout.containerdConfig,
      containerdConfig({ layout, sandboxImage: spec.sandboxImage, cniBinDir: cniBin }),
    );
    writeFileSync(layout.cniTemplate, cniTemplate(layout));
    writeFileSync(
      layout.kubeletConfig,
      kubeletConfig({
        layout,
        clientCaFile: spec.clientCaFile,
        taints: spec.taints,
        allowedUnsafeSysctls: spec.allowedUnsafeSysctls,
        clusterDns: spec.clusterDns,
      }),
    );
    writeFileSync(
      layout.kubeProxyConfig,
      kubeProxyConfig({
        nodeName: layout.name,
        kubeconfig: layout.kubeProxyKubeconfig,
        clusterCidr: spec.clusterCidr,
      }),
    );
    createCgroupRoot(layout.cgroupRoot);
    const [holder, ...holderArgs] = MOUNT_NAMESPACE_HOLDER;
    await this.#spawn("mount-namespace", holder!, holderArgs, "sleep infinity", [
      "nsenter",
      `--net=/run/netns/${spec.netns}`,
      "--",
    ]);
    await prepareMountNamespace(layout, this.#process("mount-namespace")!.pid);

    await this.#spawn(
      "containerd",
      containerd,
      ["--config", layout.containerdConfig],
      `--config ${layout.containerdConfig}`,
    );
    const up = await waitUntil(
      async () => !this.#exited("containerd") && (await this.#ctr(["version"])).code === 0,
      30_000,
      200,
    );
    if (!up) throw this.#failed("containerd", "did not answer on its socket within 30 s");
    await this.importImages(spec.images);

    const labels = Object.entries(spec.labels ?? {}).map(([k, v]) => `${k}=${v}`);
    await this.#spawn(
      "kubelet",
      kubelet,
      [
        `--config=${layout.kubeletConfig}`,
        `--kubeconfig=${layout.kubeletKubeconfig}`,
        `--root-dir=${layout.kubeletRoot}`,
        `--cert-dir=${join(layout.kubeletRoot, "pki")}`,
        `--hostname-override=${layout.name}`,
        `--node-ip=${nodeIp}`,
        ...(labels.length ? [`--node-labels=${labels.join(",")}`] : []),
        "--v=2",
      ],
      `--root-dir=${layout.kubeletRoot}`,
    );
    await this.#spawn(
      "kube-proxy",
      kubeProxy,
      [`--config=${layout.kubeProxyConfig}`],
      `--config=${layout.kubeProxyConfig}`,
    );
  }

  /** Imports OCI archives into the node's containerd, under the names they carry (what pods use). */
  async importImages(archives: string[]): Promise<void> {
    for (const archive of archives) {
      const r = await this.#ctr(["images", "import", archive], 300_000);
      if (r.code !== 0)
        throw new KubeletNodeError(
          `node ${this.layout.name}: 'ctr images import ${archive}' failed: ${r.stderr.trim()}`,
        );
    }
  }

  /** `ctr` against the node's containerd, in the namespace the CRI plugin uses. */
  #ctr(args: string[], timeoutMs = 30_000) {
    return execCommand("ctr", ["--address", this.layout.containerdSocket, "--namespace", "k8s.io", ...args], {
      timeoutMs,
    });
  }

  /** Starts `command` in the node's namespaces (or with the `enter` prefix given), tracked by pid. */
  async #spawn(
    name: string,
    command: string,
    args: string[],
    marker: string,
    enter?: string[],
  ): Promise<void> {
    const logFile = join(this.layout.logs, `${name}.log`);
    const [nsenter, ...prefix] = enter ?? enterNode(this.#spec!.netns, this.#process("mount-namespace")!.pid);
    const argv = [nsenter!, ...prefix, command, ...args];
    const pid = startDaemon({ name, command: argv[0]!, args: argv.slice(1), logFile });
    this.processes.push({ name, pid, marker, logFile, argv });
    // nsenter execs the command in place; a failure to enter shows as an early exit.
    await waitUntil(() => (commandLine(pid) ?? "").includes(marker) || !runs(pid, ""), 5_000, 20);
    if (this.#exited(name)) throw this.#failed(name, "exited during start-up");
  }

  #process(name: string): NodeProcess | undefined {
    return this.processes.find((p) => p.name === name);
  }

  #exited(name: string): boolean {
    const p = this.#process(name);
    return p === undefined || !runs(p.pid, p.marker);
  }

  #failed(name: string, what: string): KubeletNodeError {
    const p = this.#process(name);
    return new KubeletNodeError(
      `node ${this.layout.name}: ${name} ${what}; last lines of ${p?.logFile ?? "(no log)"}:\n${p ? lastLines(p.logFile, 20) : ""}`,
    );
  }

  /** Whether the node's processes all still run. */
  running(): boolean {
    return this.processes.every((p) => runs(p.pid, p.marker));
  }

  /**
   * Restarts whichever of containerd, the kubelet and kube-proxy died, as a node's init system
   * would, in the node's namespaces and with their configuration as before; the pods' containers
   * keep running meanwhile. Returns the names restarted. A node whose mount namespace is gone
   * (its holder died) cannot be healed so: it must be made afresh.
   */
  async restartDead(): Promise<string[]> {
    if (this.#exited("mount-namespace"))
      throw new KubeletNodeError(
        `node ${this.layout.name}: its mount namespace is gone; make the node afresh`,
      );
    const dead = this.processes.filter((p) => p.name !== "mount-namespace" && !runs(p.pid, p.marker));
    // The kubelet refuses to start without its cgroup root, which a stale-lab reaper may have taken.
    if (dead.length) createCgroupRoot(this.layout.cgroupRoot);
    for (const p of dead) {
      // One restarted by an earlier repair that was never recorded (it failed later) is adopted.
      const orphan = findByMarker(p.marker);
      if (orphan !== undefined) {
        p.pid = orphan;
        continue;
      }
      p.pid = startDaemon({ name: p.name, command: p.argv[0]!, args: p.argv.slice(1), logFile: p.logFile });
      await waitUntil(() => (commandLine(p.pid) ?? "").includes(p.marker) || !runs(p.pid, ""), 5_000, 20);
      if (this.#exited(p.name)) throw this.#failed(p.name, "exited during its restart");
    }
    return dead.map((p) => p.name);
  }

  /** Whether restartDead() can heal it: its mount namespace lives. */
  healable(): boolean {
    return !this.#exited("mount-namespace");
  }

  /** The containerd shims of this node (they outlive containerd): by the socket in their command line. */
  shimPids(): number[] {
    const address = `-address ${this.layout.containerdSocket}`;
    return readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .map(Number)
      .filter((pid) => (commandLine(pid) ?? "").includes(address));
  }

  /**
   * Stops the node and removes all of it: kube-proxy and the kubelet (SIGTERM), the pods' processes
   * (by the node's cgroups), containerd and its shims, the mount namespace (and with it every
   * volume, root filesystem and pod network namespace mount), the cgroups and the node's folder.
   * The Node object and the network namespace are the caller's. Idempotent.
   */
  async stop(): Promise<void> {
    await this.#halt();
    // As the netns lab does with its logs, when asked (e.g. in CI, to read after a failed test).
    const keep = process.env.PORTABLE_LB_KEEP_LAB_LOGS;
    if (keep && existsSync(this.layout.logs))
      cpSync(this.layout.logs, join(keep, `node-${this.layout.name}`), { recursive: true });
    rmSync(this.layout.dir, { recursive: true, force: true });
  }

  /** Stops every process of the node (its pods' too) and removes its cgroups; its folder stays. */
  async #halt(): Promise<void> {
    for (const name of ["kube-proxy", "kubelet"]) {
      const p = this.#process(name);
      if (p) await stopProcess(p.pid, p.marker, 10_000);
    }
    for (const pid of cgroupPids(this.layout.cgroupRoot)) kill(pid);
    const containerd = this.#process("containerd");
    if (containerd) await stopProcess(containerd.pid, containerd.marker, 10_000);
    for (const pid of this.shimPids()) kill(pid);
    await waitUntil(() => this.shimPids().length === 0, 10_000, 50);
    // Its last process gone, the mount namespace ends with every mount in it.
    const holder = this.#process("mount-namespace");
    if (holder) await stopProcess(holder.pid, holder.marker, 5_000);
    await removeCgroupRoot(this.layout.cgroupRoot);
  }

  /** Mount points under the node's folder in any process's view: none once stopped. */
  static mountsUnder(dir: string): string[] {
    const found = new Set<string>();
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      try {
        for (const line of readFileSync(`/proc/${pid}/mountinfo`, "utf8").split("\n")) {
          const point = line.split(" ")[4];
          if (point?.startsWith(dir)) found.add(point);
        }
      } catch {
        // gone, or not readable
      }
    }
    return [...found];
  }
}
