// A lab node's own mount namespace, shared by its containerd, kubelet and kube-proxy, so that a node
// changes nothing of the machine's:
// - the kubelet insists on kernel.panic=10, kernel.panic_on_oops=1, vm.overcommit_memory=1 and
//   keyring limits, and would write them machine-wide: here those /proc/sys files are shadowed by
//   files holding the values it wants, so it finds them set and writes nothing;
// - the kubelet links every container's log into /var/log/containers and containerd's shims keep
//   their sockets in /run/containerd whatever containerd's state folder: here /run is the node's own
//   tmpfs and /var/log a folder of the node's;
// - its mounts (volumes, container root filesystems, pods' network namespaces in /run/netns) live
//   and die with it.
// A process in the node's network namespace holds it, so whatever kills the node's processes (its
// own stop, or the netns lab's reaper) ends it too.
import { readlinkSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execCommand } from "../netns/netnsLab.ts";
import { waitUntil } from "../processes.ts";
import type { NodeLayout } from "./nodeLayout.ts";

/** What the kubelet's container manager checks (setupKernelTunables), as /proc/sys paths. */
export const KUBELET_KERNEL_SETTINGS: Readonly<Record<string, string>> = {
  "vm/overcommit_memory": "1",
  "vm/panic_on_oom": "0",
  "kernel/panic": "10",
  "kernel/panic_on_oops": "1",
  "kernel/keys/root_maxkeys": "1000000",
  "kernel/keys/root_maxbytes": "25000000",
};

/** The holder's command: a new mount namespace (private: nothing propagates either way), idle. */
export const MOUNT_NAMESPACE_HOLDER = [
  "unshare",
  "--mount",
  "--propagation",
  "private",
  "--",
  "sleep",
  "infinity",
];

export class MountNamespaceError extends Error {}

/** `nsenter` arguments that run a command in the node's network and mount namespaces. */
export function enterNode(netns: string, holderPid: number): string[] {
  // nsenter, not `ip netns exec`: that one remounts /sys, and runc then finds no cgroup mounts.
  return ["nsenter", `--net=/run/netns/${netns}`, `--mount=/proc/${holderPid}/ns/mnt`, "--"];
}

const mountNamespaceOf = (pid: number | "self"): string | undefined => {
  try {
    return readlinkSync(`/proc/${pid}/ns/mnt`);
  } catch {
    return undefined;
  }
};

/** Waits for the holder's namespace, then gives the node its own /run and /var/log and the shadows. */
export async function prepareMountNamespace(layout: NodeLayout, holderPid: number): Promise<void> {
  const where = `node ${layout.name}: mount namespace`;
  const own = mountNamespaceOf("self");
  const made = await waitUntil(
    () => {
      const ns = mountNamespaceOf(holderPid);
      return ns !== undefined && ns !== own;
    },
    5_000,
    20,
  );
  if (!made) throw new MountNamespaceError(`${where}: its holder (pid ${holderPid}) made none`);
  const mount = async (...args: string[]) => {
    const all = [`--mount=/proc/${holderPid}/ns/mnt`, "mount", ...args];
    const r = await execCommand("nsenter", all, { timeoutMs: 15_000 });
    if (r.code !== 0)
      throw new MountNamespaceError(`${where}: 'nsenter ${all.join(" ")}' failed: ${r.stderr.trim()}`);
  };
  // The machine's own /run/netns mount (where `ip netns` keeps the lab's namespaces) is copied into
  // the node's namespace; hidden under the node's /run it would still be the entry runtimes find for
  // that path in mountinfo (private, which fails HostToContainer mounts of the node's /run/netns).
  const inherited = await execCommand(
    "nsenter",
    [`--mount=/proc/${holderPid}/ns/mnt`, "umount", "--lazy", "/run/netns"],
    { timeoutMs: 15_000 },
  );
  if (inherited.code !== 0 && !/not mounted|no mount point/.test(inherited.stderr))
    throw new MountNamespaceError(
      `${where}: unmounting the machine's /run/netns failed: ${inherited.stderr.trim()}`,
    );
  await mount("-t", "tmpfs", "-o", "mode=0755,size=64m", "tmpfs", "/run");
  // Shared within the node (a peer group of its own: the namespace is private to the machine), as
  // on a real node: pods' network namespaces under /run/netns then reach a pod that mounts the
  // folder with HostToContainer propagation (the DSR node agent), which needs a shared source.
  await mount("--make-rshared", "/run");
  mkdirSync(layout.varLog, { recursive: true });
  await mount("--bind", layout.varLog, "/var/log");
  mkdirSync(layout.sysctlShadows, { recursive: true });
  for (const [key, value] of Object.entries(KUBELET_KERNEL_SETTINGS)) {
    const shadow = join(layout.sysctlShadows, key.replaceAll("/", "."));
    writeFileSync(shadow, `${value}\n`, { mode: 0o444 });
    await mount("--bind", "-o", "ro", shadow, `/proc/sys/${key}`);
  }
}
