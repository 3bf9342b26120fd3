// One container of a rendered pod spec, run from an unpacked image under runc with what the spec
// asks of the runtime for its process: command and args, environment (downward API values given by
// the test), user, capabilities (the runtime's default set less `drop`, plus `add`; nothing
// inheritable or ambient), no_new_privs, read-only root, memory limit, the pod's sysctls and volume
// mounts, in a network namespace the test made. A test harness, not a kubelet: no probes, restarts
// or seccomp profile (RuntimeDefault is the runtime's own list, which Debian's runc does not ship),
// and it refuses `privileged`, which portable-lb never asks for. Detached here (`start`); followed
// to its exit status in runcProcess.ts.
import type { V1Container } from "@kubernetes/client-node";
import { closeSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { execCommand, type ExecResult } from "@portable-lb/lab";
import type { ImageConfig } from "./ociArchive.ts";

/** containerd's default capabilities (what a container has unless its spec drops them). */
export const RUNTIME_DEFAULT_CAPABILITIES = [
  "CHOWN",
  "DAC_OVERRIDE",
  "FSETID",
  "FOWNER",
  "MKNOD",
  "NET_RAW",
  "SETGID",
  "SETUID",
  "SETFCAP",
  "SETPCAP",
  "NET_BIND_SERVICE",
  "SYS_CHROOT",
  "KILL",
  "AUDIT_WRITE",
];

export interface RuncContainerOptions {
  /** runc's container id; unique on the machine. */
  id: string;
  container: V1Container;
  image: { rootfs: string; config: ImageConfig };
  /** The pod's network namespace, e.g. /run/netns/<name>. */
  netnsPath: string;
  hostname: string;
  /** Host folders or files standing for the pod's volumes, by volume name. */
  volumes: Record<string, string>;
  /** Values of the downward API fields the container's env names (fieldPath -> value). */
  fields?: Record<string, string>;
  /** Extra environment (e.g. KUBECONFIG, which a cluster's ServiceAccount replaces). */
  env?: Record<string, string>;
  /** Extra bind mounts (host path -> container path), read-only. */
  files?: Record<string, string>;
  /** The pod's sysctls, which the runtime sets in the pod's namespaces. */
  sysctls?: Record<string, string>;
}

/** The user and capabilities the container's process gets (capability names without CAP_, sorted). */
export interface ContainerSecurity {
  uid: number;
  gid: number;
  capabilities: string[];
  noNewPrivs: boolean;
}

const MEMORY_UNITS: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 };

function memoryBytes(quantity: string | undefined): number | undefined {
  const m = quantity === undefined ? null : /^(\d+)(Ki|Mi|Gi)$/.exec(quantity);
  if (quantity !== undefined && !m) throw new Error(`memory quantity ${quantity} is not handled here`);
  return m ? Number(m[1]) * MEMORY_UNITS[m[2]!]! : undefined;
}

/** What the spec and the image's USER give the container's process; pure. */
export function containerSecurity(c: V1Container, image: ImageConfig): ContainerSecurity {
  const sc = c.securityContext ?? {};
  if (sc.privileged) throw new Error(`${c.name}: privileged containers are refused here`);
  const [imageUid, imageGid] = (image.User ?? "0:0").split(":").map(Number);
  const uid = sc.runAsUser ?? imageUid ?? 0;
  const dropped = sc.capabilities?.drop ?? [];
  const capabilities = [
    ...new Set([
      ...RUNTIME_DEFAULT_CAPABILITIES.filter((cap) => !dropped.includes("ALL") && !dropped.includes(cap)),
      ...(sc.capabilities?.add ?? []),
    ]),
  ].sort();
  return {
    uid,
    gid: sc.runAsGroup ?? imageGid ?? uid,
    capabilities,
    noNewPrivs: sc.allowPrivilegeEscalation === false,
  };
}

/** The container's own env as NAME=value, downward API fields from `fields` (fieldPath -> value). */
export function containerEnv(c: V1Container, fields: Record<string, string> = {}): string[] {
  return (c.env ?? []).map((e) => {
    const value = e.value ?? (e.valueFrom?.fieldRef && fields[e.valueFrom.fieldRef.fieldPath]);
    if (value === undefined) throw new Error(`${c.name}: env ${e.name} has no value here`);
    return `${e.name}=${value}`;
  });
}

/** The OCI runtime spec (config.json) for the container; pure. */
export function runtimeSpec(o: RuncContainerOptions, rootfs: string): object {
  const c = o.container;
  const sc = c.securityContext ?? {};
  const security = containerSecurity(c, o.image.config);
  const caps = security.capabilities.map((cap) => `CAP_${cap}`);
  const env = [
    ...(o.image.config.Env ?? []),
    ...containerEnv(c, o.fields),
    ...Object.entries(o.env ?? {}).map(([k, v]) => `${k}=${v}`),
  ];
  const volumeMounts = (c.volumeMounts ?? []).map((m) => {
    const source = o.volumes[m.name];
    if (!source) throw new Error(`${c.name}: no host folder for volume ${m.name}`);
    return { destination: m.mountPath, type: "bind", source, options: ["rbind", m.readOnly ? "ro" : "rw"] };
  });
  const fileMounts = Object.entries(o.files ?? {}).map(([source, destination]) => ({
    destination,
    type: "bind",
    source,
    options: ["rbind", "ro"],
  }));
  const memory = memoryBytes(c.resources?.limits?.memory);
  return {
    ociVersion: "1.0.2",
    process: {
      terminal: false,
      user: { uid: security.uid, gid: security.gid },
      // Kubernetes' rule: a command replaces the image's entrypoint and its Cmd.
      args: c.command
        ? [...c.command, ...(c.args ?? [])]
        : [...(o.image.config.Entrypoint ?? []), ...(c.args ?? o.image.config.Cmd ?? [])],
      env,
      cwd: c.workingDir ?? o.image.config.WorkingDir ?? "/",
      capabilities: { bounding: caps, effective: caps, permitted: caps, inheritable: [], ambient: [] },
      noNewPrivileges: security.noNewPrivs,
    },
    root: { path: rootfs, readonly: sc.readOnlyRootFilesystem === true },
    hostname: o.hostname,
    mounts: [
      { destination: "/proc", type: "proc", source: "proc" },
      { destination: "/dev", type: "tmpfs", source: "tmpfs", options: ["nosuid", "strictatime", "mode=755"] },
      {
        destination: "/dev/pts",
        type: "devpts",
        source: "devpts",
        options: ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
      },
      {
        destination: "/dev/shm",
        type: "tmpfs",
        source: "shm",
        options: ["nosuid", "noexec", "nodev", "mode=1777"],
      },
      {
        destination: "/dev/mqueue",
        type: "mqueue",
        source: "mqueue",
        options: ["nosuid", "noexec", "nodev"],
      },
      { destination: "/sys", type: "sysfs", source: "sysfs", options: ["nosuid", "noexec", "nodev", "ro"] },
      ...volumeMounts,
      ...fileMounts,
    ],
    linux: {
      namespaces: [
        { type: "pid" },
        { type: "ipc" },
        { type: "uts" },
        { type: "mount" },
        { type: "network", path: o.netnsPath },
      ],
      cgroupsPath: `/${o.id}`,
      ...(memory !== undefined && { resources: { memory: { limit: memory } } }),
      ...(o.sysctls && { sysctl: o.sysctls }),
      maskedPaths: ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/sys/firmware"],
      readonlyPaths: ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
    },
  };
}

/** Writes the container's bundle (dir/bundle/config.json) and makes runc's state folder `root`. */
export function writeBundle(
  o: RuncContainerOptions,
  rootfs: string,
  dir: string,
  root = join(dir, "runc"),
): string {
  const bundle = join(dir, "bundle");
  mkdirSync(bundle, { recursive: true });
  mkdirSync(root, { recursive: true });
  writeFileSync(join(bundle, "config.json"), JSON.stringify(runtimeSpec(o, rootfs), null, 2));
  return bundle;
}

/** runc with its state under `root`, bounded in time. */
export function runc(root: string, args: string[], timeoutMs = 30_000): Promise<ExecResult> {
  return execCommand("runc", ["--root", root, ...args], { timeoutMs });
}

/** The ids of the containers runc holds under `root` (none once every one was deleted). */
export async function runcContainers(root: string): Promise<string[]> {
  const r = await runc(root, ["list", "--quiet"]);
  if (r.code !== 0) throw new Error(`runc --root ${root} list: ${r.stderr.trim()}`);
  return r.stdout.split("\n").filter(Boolean);
}

/** A started container; `remove()` stops and deletes it (and its cgroup) by id. */
export class RuncContainer {
  readonly id: string;
  readonly log: string;
  readonly #root: string;

  private constructor(id: string, root: string, log: string) {
    this.id = id;
    this.#root = root;
    this.log = log;
  }

  /** Writes the bundle under `dir` and starts the container detached (its output goes to dir/log). */
  static async start(o: RuncContainerOptions, rootfs: string, dir: string): Promise<RuncContainer> {
    const root = join(dir, "runc");
    const bundle = writeBundle(o, rootfs, dir, root);
    const log = join(dir, "log");
    const fd = openSync(log, "a");
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn("runc", ["--root", root, "run", "--detach", "--bundle", bundle, o.id], {
          stdio: ["ignore", fd, fd],
        });
        child.once("error", reject);
        child.once("exit", resolve);
      });
      if (code !== 0) throw new Error(`runc run ${o.id}: exit ${code}; see ${log}`);
    } finally {
      closeSync(fd);
    }
    return new RuncContainer(o.id, root, log);
  }

  /** Runs `argv` in the container as its process runs (user, capabilities, no_new_privs). */
  exec(argv: string[], timeoutMs = 30_000): Promise<ExecResult> {
    return runc(this.#root, ["exec", this.id, ...argv], timeoutMs);
  }

  /** The container's processes, as host pids. */
  async pids(): Promise<number[]> {
    const r = await runc(this.#root, ["ps", "--format", "json", this.id]);
    if (r.code !== 0) throw new Error(`runc ps ${this.id}: ${r.stderr.trim()}`);
    return JSON.parse(r.stdout || "[]") as number[];
  }

  async status(): Promise<string> {
    const r = await runc(this.#root, ["state", this.id]);
    return r.code === 0 ? (JSON.parse(r.stdout) as { status: string }).status : "gone";
  }

  /** SIGTERM, up to `graceMs` for it to stop, then SIGKILL; then deletes the container. */
  async remove(graceMs = 10_000): Promise<void> {
    if ((await this.status()) === "running") {
      await runc(this.#root, ["kill", this.id, "TERM"]);
      for (const deadline = Date.now() + graceMs; Date.now() < deadline;) {
        if ((await this.status()) !== "running") break;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await runc(this.#root, ["delete", "--force", this.id]);
  }
}
