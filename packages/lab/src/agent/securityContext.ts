// The user, groups and capabilities a container process gets, from the pod's and the container's
// securityContext (the container's wins), with containerd's rules: a non-privileged container starts
// from containerd's default capability set, `drop` then `add` apply, and the result bounds what the
// process can ever have. Root gets that set; any other user gets none effective (Kubernetes grants
// no ambient capabilities), exactly as on a real node. Applied with util-linux setpriv.
import type { V1Container, V1Pod } from "@kubernetes/client-node";
import { ContainerConfigError } from "./podEnv.ts";

/** containerd's default set for non-privileged containers. */
export const DEFAULT_CAPABILITIES = [
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "NET_RAW",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
];

/** Every capability Linux 6.x knows (what "ALL" means). */
export const ALL_CAPABILITIES = [
  "AUDIT_CONTROL",
  "AUDIT_READ",
  "AUDIT_WRITE",
  "BLOCK_SUSPEND",
  "BPF",
  "CHECKPOINT_RESTORE",
  "CHOWN",
  "DAC_OVERRIDE",
  "DAC_READ_SEARCH",
  "FOWNER",
  "FSETID",
  "IPC_LOCK",
  "IPC_OWNER",
  "KILL",
  "LEASE",
  "LINUX_IMMUTABLE",
  "MAC_ADMIN",
  "MAC_OVERRIDE",
  "MKNOD",
  "NET_ADMIN",
  "NET_BIND_SERVICE",
  "NET_BROADCAST",
  "NET_RAW",
  "PERFMON",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYSLOG",
  "SYS_ADMIN",
  "SYS_BOOT",
  "SYS_CHROOT",
  "SYS_MODULE",
  "SYS_NICE",
  "SYS_PACCT",
  "SYS_PTRACE",
  "SYS_RAWIO",
  "SYS_RESOURCE",
  "SYS_TIME",
  "SYS_TTY_CONFIG",
  "WAKE_ALARM",
];

export interface ProcessSecurity {
  uid: number;
  gid: number;
  /** Supplementary groups: supplementalGroups and fsGroup. */
  groups: number[];
  privileged: boolean;
  /** The bounding set (sorted); root's effective set. Every capability when privileged. */
  capabilities: string[];
  /** allowPrivilegeEscalation: false → no_new_privs. */
  noNewPrivs: boolean;
  readOnlyRootFilesystem: boolean;
}

function capabilityName(raw: string): string {
  const name = raw.toUpperCase().replace(/^CAP_/, "");
  if (name !== "ALL" && !ALL_CAPABILITIES.includes(name)) {
    throw new ContainerConfigError(`unknown capability "${raw}"`);
  }
  return name;
}

/** Throws ContainerConfigError where the kubelet would refuse to create the container. */
export function processSecurity(pod: V1Pod, container: V1Container): ProcessSecurity {
  const podSc = pod.spec?.securityContext ?? {};
  const sc = container.securityContext ?? {};
  // No image, so no image USER: a container that names no user runs as root.
  const uid = sc.runAsUser ?? podSc.runAsUser ?? 0;
  const gid = sc.runAsGroup ?? podSc.runAsGroup ?? 0;
  if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) === true && uid === 0) {
    throw new ContainerConfigError(
      `container "${container.name}" has runAsNonRoot and would run as root; set runAsUser to a non-zero id`,
    );
  }
  const groups = [
    ...new Set([
      ...(podSc.supplementalGroups ?? []),
      ...(podSc.fsGroup !== undefined ? [podSc.fsGroup] : []),
    ]),
  ]
    .filter((g) => g !== gid)
    .sort((a, b) => a - b);
  const privileged = sc.privileged === true;
  let caps = new Set(privileged ? ALL_CAPABILITIES : DEFAULT_CAPABILITIES);
  if (!privileged) {
    for (const d of (sc.capabilities?.drop ?? []).map(capabilityName)) {
      if (d === "ALL") caps.clear();
      else caps.delete(d);
    }
    for (const a of (sc.capabilities?.add ?? []).map(capabilityName)) {
      if (a === "ALL") caps = new Set(ALL_CAPABILITIES);
      else caps.add(a);
    }
  }
  return {
    uid,
    gid,
    groups,
    privileged,
    capabilities: [...caps].sort(),
    noNewPrivs: !privileged && sc.allowPrivilegeEscalation === false,
    readOnlyRootFilesystem: sc.readOnlyRootFilesystem === true,
  };
}

/** setpriv arguments that put a root process into `sec` before it execs the container's command. */
export function setprivArgs(sec: ProcessSecurity): string[] {
  const args = ["--reuid", String(sec.uid), "--regid", String(sec.gid)];
  args.push(...(sec.groups.length ? ["--groups", sec.groups.join(",")] : ["--clear-groups"]));
  if (!sec.privileged) {
    const keep = sec.capabilities.map((c) => `,+${c.toLowerCase()}`).join("");
    // Inheritable and ambient sets empty, as containerd leaves them: nothing survives an exec by a non-root user.
    args.push("--bounding-set", `-all${keep}`, "--inh-caps", "-all", "--ambient-caps", "-all");
  }
  if (sec.noNewPrivs) args.push("--no-new-privs");
  return args;
}
