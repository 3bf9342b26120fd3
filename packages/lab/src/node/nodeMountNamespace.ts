// A lab node's own mount namespace, shared by its containerd, kubelet and kube-proxy. It exists for
// one reason: the kubelet insists on kernel.panic=10, kernel.panic_on_oops=1, vm.overcommit_memory=1
// and keyring limits, and would write them machine-wide. Inside this namespace those /proc/sys files
// are shadowed by files holding the values it wants, so it finds them set and writes nothing. Its
// mounts (volumes, container root filesystems, pods' network namespaces) live and die with it: the
// host never sees them. A process in the node's network namespace holds it, so whatever kills the
// node's processes (its own stop, or the netns lab's reaper) ends it too.
import { readlinkSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execCommand } from "../../../providers/src/lab/netns/netnsLab.ts";
import { waitUntil } from "../../../providers/src/lab/processes.ts";
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

/** Waits for the holder's namespace, then shadows the kernel settings the kubelet checks. */
export async function shadowKernelSettings(layout: NodeLayout, holderPid: number): Promise<void> {
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
  mkdirSync(layout.sysctlShadows, { recursive: true });
  for (const [key, value] of Object.entries(KUBELET_KERNEL_SETTINGS)) {
    const shadow = join(layout.sysctlShadows, key.replaceAll("/", "."));
    writeFileSync(shadow, `${value}\n`, { mode: 0o444 });
    const args = [
      `--mount=/proc/${holderPid}/ns/mnt`,
      "mount",
      "--bind",
      "-o",
      "ro",
      shadow,
      `/proc/sys/${key}`,
    ];
    const r = await execCommand("nsenter", args, { timeoutMs: 15_000 });
    if (r.code !== 0)
      throw new MountNamespaceError(`${where}: 'nsenter ${args.join(" ")}' failed: ${r.stderr.trim()}`);
  }
}
