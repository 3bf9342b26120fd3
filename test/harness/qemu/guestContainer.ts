// One container of a rendered pod spec, started in the IPVS guest as far as its busybox userland
// allows a runtime's part: the pod's sysctls set in its network namespace, then the container's
// command and args with its env only (downward API values from the test), as its user, with only
// its capabilities (bounding set; nothing inheritable or ambient, as runc gives them),
// no_new_privs, and a read-only root where the spec asks for one (/tmp, /run and /dev stay the
// guest's writable mounts: the emptyDirs). Not done here: the PID namespace, the memory limit (no
// cgroup), seccomp and volume mounts (the test places the config's files at their mount paths).
// util-linux's setpriv does the privilege part (busybox's cannot set the bounding set); it comes
// from this machine, with its libraries (guestNode.ts).
import type { V1Container, V1PodSpec } from "@kubernetes/client-node";
import type { ImageConfig } from "../oci/ociArchive.ts";
import { containerEnv, containerSecurity } from "../oci/runcContainer.ts";
import { GUEST_PATHS } from "./guestPaths.ts";
import { shellQuote as quote } from "./guestTopology.ts";

/** Where setpriv is in the guest; pass GUEST_SETPRIV_PROGRAM to guestNodeEntries' programs. */
export const GUEST_SETPRIV = "/usr/local/sbin/setpriv";
export const GUEST_SETPRIV_PROGRAM = { [GUEST_SETPRIV]: "/usr/bin/setpriv" };
/**
 * util-linux's nsenter, as the LB image has it, first on the image's PATH: the node agent enters pod
 * namespaces with it, and busybox's would run its own `ip` applet there (no `-j`), not iproute2's.
 */
export const GUEST_NSENTER_PROGRAM = { "/usr/local/sbin/nsenter": "/usr/bin/nsenter" };

export interface GuestContainerOptions {
  /** The rendered pod spec, as the manifest carries it. */
  spec: object;
  container: string;
  /** The pod's network namespace in the guest. */
  netns: string;
  /** Values of the downward API fields the container's env names (fieldPath -> value). */
  fields: Record<string, string>;
  /** The image's config (its user and env). */
  image: ImageConfig;
  /** Env a cluster adds beyond the spec (API credentials). */
  env?: Record<string, string>;
  /** Env entries of the spec the caller leaves out (it says why). */
  omitEnv?: string[];
}

export interface GuestContainer {
  container: V1Container;
  /** Shell lines: the pod's sysctls, as the runtime sets them before any container starts. */
  sysctls: string[];
  /** A shell command running the container's process in the foreground (its pid is the command's). */
  command: string;
}

export function guestContainer(o: GuestContainerOptions): GuestContainer {
  const spec = o.spec as V1PodSpec;
  const c = spec.containers.find((x) => x.name === o.container);
  if (!c) throw new Error(`guestContainer: the pod spec has no container "${o.container}"`);
  if (!c.command) throw new Error(`guestContainer: ${c.name} has no command (the guest has no image config)`);
  const security = containerSecurity(c, o.image);
  const caps = security.capabilities.map((cap) => `+${cap.toLowerCase()}`).join(",");
  const env = [
    ...(o.image.Env ?? []),
    ...containerEnv({ ...c, env: c.env?.filter((e) => !o.omitEnv?.includes(e.name)) }, o.fields),
    ...Object.entries(o.env ?? {}).map(([k, v]) => `${k}=${v}`),
  ];
  const setpriv = [
    GUEST_SETPRIV,
    ...(security.noNewPrivs ? ["--no-new-privs"] : []),
    ...[`--reuid=${security.uid}`, `--regid=${security.gid}`, "--clear-groups"],
    ...["--inh-caps=-all", "--ambient-caps=-all", `--bounding-set=-all${caps ? `,${caps}` : ""}`],
  ];
  const argv = [...setpriv, "env", "-i", ...env, ...c.command, ...(c.args ?? [])];
  // `ip netns exec` runs the command in a mount namespace of its own, so the read-only root is
  // this process's alone.
  const readOnly = c.securityContext?.readOnlyRootFilesystem ? "mount -o remount,bind,ro / && " : "";
  return {
    container: c,
    sysctls: (spec.securityContext?.sysctls ?? []).map(
      (s) => `${GUEST_PATHS.ip} netns exec ${o.netns} sysctl -q -w ${quote(`${s.name}=${s.value}`)}`,
    ),
    command: `${GUEST_PATHS.ip} netns exec ${o.netns} sh -c ${quote(`${readOnly}exec ${argv.map(quote).join(" ")}`)}`,
  };
}
