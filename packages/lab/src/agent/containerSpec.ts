// What one run of a container is made of, from the pod spec and what the node has ready: its
// environment (podEnv.ts, plus the PATH, HOSTNAME and HOME a runtime sets), its user and
// capabilities (securityContext.ts), its bind mounts (the pod's volumes at their mountPaths, subPath
// included, the pod's /etc/hosts and the termination-message file) and its command line. Throws
// ContainerConfigError where the kubelet reports CreateContainerConfigError.
import type { V1ConfigMap, V1Container, V1Pod, V1Secret } from "@kubernetes/client-node";
import { chmodSync, existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { isAbsolute, join, posix } from "node:path";
import type { MountSpec } from "./containerLaunch.ts";
import {
  ContainerConfigError,
  containerEnv,
  expandCommand,
  expandVars,
  type Allocatable,
  type PodRuntimeFields,
} from "./podEnv.ts";
import { containerFiles } from "./podState.ts";
import { configMapBytes, secretBytes, type PreparedVolume } from "./podVolumes.ts";
import { processSecurity, setprivArgs } from "./securityContext.ts";

export interface ContainerInputs {
  pod: V1Pod;
  container: V1Container;
  /** The pod's folder (its /etc/hosts, the termination-message files). */
  podDir: string;
  volumes: Map<string, PreparedVolume>;
  runtime: PodRuntimeFields;
  configMap: (name: string) => V1ConfigMap | undefined;
  secret: (name: string) => V1Secret | undefined;
  allocatable: Allocatable;
  apiServer: { host: string; port: number };
  /** The agent's PATH, which containers get as theirs (no image brings one). */
  agentPath: string;
  hostname: string;
}

export interface ContainerSpec {
  env: Record<string, string>;
  setpriv: string[];
  readOnlyRoot: boolean;
  mounts: MountSpec[];
  /** command + args, $(VAR) expanded; argv[0] not yet resolved to a path. */
  argv: string[];
}

/** The pod's hostname: its own name (or spec.hostname); a hostNetwork pod's is its node's. */
export function podHostname(pod: V1Pod, nodeName: string): string {
  if (pod.spec?.hostNetwork) return nodeName.split(".")[0]!;
  return (pod.spec?.hostname ?? pod.metadata!.name!).slice(0, 63);
}

/** The pod's /etc/hosts, as the kubelet writes it for pods with their own network. */
export function podHostsFile(pod: V1Pod, podIp: string | undefined, nodeName: string): string {
  const lines = [
    "# Kubernetes-managed hosts file (lab agent).",
    "127.0.0.1\tlocalhost",
    "::1\tlocalhost ip6-localhost ip6-loopback",
    `${podIp}\t${podHostname(pod, nodeName)}`,
    ...(pod.spec?.hostAliases ?? []).map((a) => `${a.ip}\t${(a.hostnames ?? []).join("\t")}`),
  ];
  return `${lines.join("\n")}\n`;
}

/** Mount order: parents before the paths inside them, as container runtimes do. */
function depth(path: string): number {
  return path.split("/").filter(Boolean).length;
}

function textOf(data: Map<string, Buffer>): Record<string, string> {
  return Object.fromEntries([...data].map(([k, v]) => [k, v.toString()]));
}

/** The bind mounts of the container; creates missing subPath folders and its termination-message file. */
export function containerMounts(i: ContainerInputs, env: Map<string, string>): MountSpec[] {
  const mounts: MountSpec[] = [];
  for (const vm of i.container.volumeMounts ?? []) {
    const v = i.volumes.get(vm.name);
    if (!v) throw new ContainerConfigError(`volumeMount "${vm.name}": the pod has no such volume`);
    const sub = vm.subPathExpr ? expandVars(vm.subPathExpr, (n) => env.get(n)) : (vm.subPath ?? "");
    if (isAbsolute(sub) || sub.split("/").includes("..")) {
      throw new ContainerConfigError(
        `volumeMount "${vm.name}": subPath "${sub}" must be relative without ".."`,
      );
    }
    const source = sub ? join(v.path, sub) : v.path;
    // A missing subPath is created as a folder in the volume, as the kubelet does.
    if (sub && !existsSync(source)) mkdirSync(source, { recursive: true, mode: 0o755 });
    mounts.push({
      source,
      target: posix.normalize(vm.mountPath),
      readOnly: vm.readOnly === true || v.alwaysReadOnly,
      file: !statSync(source).isDirectory(),
    });
  }
  const taken = new Set(mounts.map((m) => m.target));
  if (!i.pod.spec?.hostNetwork && !taken.has("/etc/hosts")) {
    mounts.push({ source: join(i.podDir, "etc-hosts"), target: "/etc/hosts", readOnly: false, file: true });
  }
  const tmPath = posix.normalize(i.container.terminationMessagePath ?? "/dev/termination-log");
  if (!taken.has(tmPath)) {
    const file = containerFiles(i.podDir, i.container.name).terminationLog;
    writeFileSync(file, "");
    chmodSync(file, 0o666); // any container user writes its termination message
    mounts.push({ source: file, target: tmPath, readOnly: false, file: true });
  }
  return mounts.sort((a, b) => depth(a.target) - depth(b.target));
}

export function containerSpec(i: ContainerInputs): ContainerSpec {
  const userEnv = containerEnv(i.container, {
    pod: i.pod,
    runtime: i.runtime,
    configMap: (name) => {
      const cm = i.configMap(name);
      return cm && textOf(configMapBytes(cm));
    },
    secret: (name) => {
      const s = i.secret(name);
      return s && textOf(secretBytes(s));
    },
    allocatable: i.allocatable,
    apiServer: i.apiServer,
  });
  const sec = processSecurity(i.pod, i.container);
  const mounts = containerMounts(i, userEnv);
  // What a runtime sets from the image and the user; the spec's own variables win.
  const env = new Map([
    ["PATH", i.agentPath],
    ["HOSTNAME", i.hostname],
    ["HOME", sec.uid === 0 ? "/root" : "/"],
    ...userEnv,
  ]);
  return {
    env: Object.fromEntries(env),
    setpriv: setprivArgs(sec),
    readOnlyRoot: sec.readOnlyRootFilesystem,
    mounts,
    argv: expandCommand(i.container, env),
  };
}
