// A pod's volumes, made ready on this machine before its containers start: ConfigMap, Secret,
// downward-API and projected volumes are written into the pod's folder in the kubelet's atomic layout
// (and rewritten when their sources change), emptyDir is a folder of the pod, and hostPath maps into
// the node's root folder (`<nodeRoot>/<path>`: node namespaces share one filesystem, so node 1's
// /run/flannel must not be node 2's). Each container then bind-mounts them (containerLaunch.ts).
import type {
  V1ConfigMap,
  V1DownwardAPIVolumeFile,
  V1KeyToPath,
  V1Pod,
  V1Secret,
  V1Volume,
} from "@kubernetes/client-node";
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, openSync, statSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { checkRelativePath, writeAtomically, type ProjectedFile } from "./atomicWriter.ts";
import {
  fieldRefValue,
  formatMap,
  resourceFieldValue,
  type Allocatable,
  type PodRuntimeFields,
} from "./podEnv.ts";

/** A volume the pod cannot mount yet (the kubelet's FailedMount; retried). */
export class VolumeError extends Error {}

/** A pod spec this agent cannot run at all (reported as a failed pod, never retried). */
export class UnsupportedError extends Error {}

export interface ServiceAccountToken {
  token: string;
  /** When to ask for a new one (tokenRenewal of its issue and expiry times). */
  renewAt: Date;
}

export interface VolumeSources {
  pod: V1Pod;
  runtime: PodRuntimeFields;
  allocatable: Allocatable;
  configMap: (name: string) => V1ConfigMap | undefined;
  secret: (name: string) => V1Secret | undefined;
  /** A TokenRequest for the pod's ServiceAccount, bound to the pod (the same one until its renewal time). */
  token: (audience: string | undefined, expirationSeconds: number) => Promise<ServiceAccountToken>;
}

export interface PreparedVolume {
  path: string;
  /** ConfigMap, Secret, downward-API and projected volumes are always mounted read-only. */
  alwaysReadOnly: boolean;
}

export interface PreparedVolumes {
  volumes: Map<string, PreparedVolume>;
  /** When the earliest service account token should be renewed (the kubelet's 80% of its life, at most 24 h). */
  renewAt?: Date;
}

const SUPPORTED = ["configMap", "secret", "emptyDir", "downwardAPI", "projected", "hostPath"] as const;
const DAY_MS = 24 * 3600 * 1000;

/** Throws UnsupportedError for a volume type or projection the agent does not provide. */
export function checkVolumesSupported(pod: V1Pod): void {
  for (const v of pod.spec?.volumes ?? []) {
    const fields = v as unknown as Record<string, unknown>;
    const kinds = Object.keys(v).filter((k) => k !== "name" && fields[k] != null);
    const other = kinds.find((k) => !(SUPPORTED as readonly string[]).includes(k));
    if (other)
      throw new UnsupportedError(`volume "${v.name}": ${other} volumes are not supported by the lab agent`);
    for (const s of v.projected?.sources ?? []) {
      const kind = Object.keys(s).find((k) => (s as unknown as Record<string, unknown>)[k] != null);
      if (kind && !["configMap", "secret", "downwardAPI", "serviceAccountToken"].includes(kind)) {
        throw new UnsupportedError(
          `volume "${v.name}": ${kind} projections are not supported by the lab agent`,
        );
      }
    }
  }
}

/** Key → bytes of a ConfigMap (data as UTF-8, binaryData decoded). */
export function configMapBytes(cm: V1ConfigMap): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(cm.data ?? {})) out.set(k, Buffer.from(v, "utf8"));
  for (const [k, v] of Object.entries(cm.binaryData ?? {})) out.set(k, Buffer.from(v, "base64"));
  return out;
}

/** Key → bytes of a Secret (the API carries data base64-encoded). */
export function secretBytes(s: V1Secret): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(s.data ?? {})) out.set(k, Buffer.from(v, "base64"));
  for (const [k, v] of Object.entries(s.stringData ?? {})) out.set(k, Buffer.from(v, "utf8"));
  return out;
}

/** Files of a ConfigMap or Secret source: every key, or just `items` (each at its path). */
export function keyFiles(
  what: string,
  data: Map<string, Buffer> | undefined,
  items: V1KeyToPath[] | undefined,
  optional: boolean,
  defaultMode: number,
): Map<string, ProjectedFile> {
  const files = new Map<string, ProjectedFile>();
  if (data === undefined) {
    if (optional) return files;
    throw new VolumeError(`${what} not found`);
  }
  if (!items?.length) {
    for (const [k, content] of data) files.set(k, { content, mode: defaultMode });
    return files;
  }
  for (const item of items) {
    const content = data.get(item.key);
    if (content === undefined) {
      if (optional) continue;
      throw new VolumeError(`${what} has no key "${item.key}"`);
    }
    files.set(item.path, { content, mode: item.mode ?? defaultMode });
  }
  return files;
}

/** The content of one downward-API volume file. */
export function downwardFile(item: V1DownwardAPIVolumeFile, src: VolumeSources): string {
  if (item.fieldRef) {
    const meta = src.pod.metadata ?? {};
    if (item.fieldRef.fieldPath === "metadata.labels") return formatMap(meta.labels);
    if (item.fieldRef.fieldPath === "metadata.annotations") return formatMap(meta.annotations);
    return fieldRefValue(src.pod, item.fieldRef.fieldPath, src.runtime);
  }
  if (item.resourceFieldRef) {
    const r = item.resourceFieldRef;
    const c = [...(src.pod.spec?.initContainers ?? []), ...(src.pod.spec?.containers ?? [])].find(
      (x) => x.name === r.containerName,
    );
    if (!c) throw new VolumeError(`downwardAPI item ${item.path}: no container "${r.containerName}"`);
    return resourceFieldValue(c.resources, r.resource, r.divisor, src.allocatable);
  }
  throw new VolumeError(`downwardAPI item ${item.path}: needs fieldRef or resourceFieldRef`);
}

function downwardFiles(items: V1DownwardAPIVolumeFile[], defaultMode: number, src: VolumeSources) {
  return new Map(
    items.map((i) => [i.path, { content: Buffer.from(downwardFile(i, src)), mode: i.mode ?? defaultMode }]),
  );
}

function addAll(into: Map<string, ProjectedFile>, from: Map<string, ProjectedFile>, volume: string): void {
  for (const [path, f] of from) {
    if (into.has(path)) throw new VolumeError(`volume "${volume}": two projections write "${path}"`);
    into.set(path, f);
  }
}

/** The files of a configMap, secret, downwardAPI or projected volume; tokens are requested here. */
async function volumeFiles(
  v: V1Volume,
  src: VolumeSources,
): Promise<{ files: Map<string, ProjectedFile>; renewAt?: Date }> {
  const ns = src.pod.metadata?.namespace ?? "";
  // A ConfigMap or Secret source, as a volume of its own or one projection among others.
  const keyed = (
    kind: "ConfigMap" | "Secret",
    name: string,
    source: { items?: V1KeyToPath[]; optional?: boolean },
    mode: number,
  ) => {
    const cm = kind === "ConfigMap" ? src.configMap(name) : undefined;
    const secret = kind === "Secret" ? src.secret(name) : undefined;
    const data = cm ? configMapBytes(cm) : secret ? secretBytes(secret) : undefined;
    return keyFiles(`${kind} ${ns}/${name}`, data, source.items, source.optional === true, mode);
  };
  if (v.configMap) {
    return { files: keyed("ConfigMap", v.configMap.name!, v.configMap, v.configMap.defaultMode ?? 0o644) };
  }
  if (v.secret)
    return { files: keyed("Secret", v.secret.secretName!, v.secret, v.secret.defaultMode ?? 0o644) };
  if (v.downwardAPI) {
    return { files: downwardFiles(v.downwardAPI.items ?? [], v.downwardAPI.defaultMode ?? 0o644, src) };
  }
  const files = new Map<string, ProjectedFile>();
  let renewAt: Date | undefined;
  const mode = v.projected?.defaultMode ?? 0o644;
  for (const s of v.projected?.sources ?? []) {
    if (s.configMap) addAll(files, keyed("ConfigMap", s.configMap.name!, s.configMap, mode), v.name);
    else if (s.secret) addAll(files, keyed("Secret", s.secret.name!, s.secret, mode), v.name);
    else if (s.downwardAPI) addAll(files, downwardFiles(s.downwardAPI.items ?? [], mode, src), v.name);
    else if (s.serviceAccountToken) {
      const t = s.serviceAccountToken;
      const requested = t.expirationSeconds ?? 3600;
      const { token, renewAt: at } = await src.token(t.audience, requested);
      addAll(files, new Map([[t.path, { content: Buffer.from(token), mode }]]), v.name);
      if (!renewAt || at < renewAt) renewAt = at;
    }
  }
  return { files, ...(renewAt && { renewAt }) };
}

/** When to renew a token issued `now` that expires at `expiresAt`: at 80% of its life, at most a day on. */
export function tokenRenewal(now: Date, expiresAt: Date): Date {
  const life = expiresAt.getTime() - now.getTime();
  return new Date(now.getTime() + Math.max(1_000, Math.min(life * 0.8, DAY_MS)));
}

/** `<nodeRoot>/<path>`; ".." cannot climb out of the node root. */
export function hostPathSource(nodeRoot: string, path: string): string {
  return join(nodeRoot, posix.normalize(`/${path}`));
}

function prepareHostPath(source: string, type: string, volume: string): void {
  const exists = existsSync(source);
  const st = exists ? statSync(source) : undefined;
  const fail = (what: string) => {
    throw new VolumeError(`hostPath volume "${volume}": ${source} ${what} (type ${type})`);
  };
  switch (type) {
    case "":
    case "DirectoryOrCreate":
      // containerd creates a missing bind source as a folder, so "" behaves as DirectoryOrCreate.
      if (!exists) mkdirSync(source, { recursive: true, mode: 0o755 });
      else if (type === "DirectoryOrCreate" && !st!.isDirectory()) fail("is not a folder");
      return;
    case "Directory":
      if (!st?.isDirectory()) fail("is not an existing folder");
      return;
    case "FileOrCreate":
      if (!exists) {
        mkdirSync(dirname(source), { recursive: true, mode: 0o755 });
        closeSync(openSync(source, "a", 0o644));
      } else if (!st!.isFile()) fail("is not a file");
      return;
    case "File":
      if (!st?.isFile()) fail("is not an existing file");
      return;
    case "Socket":
      if (!st?.isSocket()) fail("is not an existing socket");
      return;
    case "CharDevice":
      if (!st?.isCharacterDevice()) fail("is not an existing character device");
      return;
    case "BlockDevice":
      if (!st?.isBlockDevice()) fail("is not an existing block device");
      return;
    default:
      fail("has an unknown hostPath type");
  }
}

/**
 * Makes every volume of the pod ready under `<podDir>/volumes` (idempotent: unchanged files are not
 * rewritten) and returns where each one is. Throws VolumeError when a source is missing.
 */
export async function prepareVolumes(
  podDir: string,
  nodeRoot: string,
  src: VolumeSources,
): Promise<PreparedVolumes> {
  const fsGroup = src.pod.spec?.securityContext?.fsGroup;
  const volumes = new Map<string, PreparedVolume>();
  let renewAt: Date | undefined;
  for (const v of src.pod.spec?.volumes ?? []) {
    if (v.hostPath) {
      const path = hostPathSource(nodeRoot, v.hostPath.path);
      prepareHostPath(path, v.hostPath.type ?? "", v.name);
      volumes.set(v.name, { path, alwaysReadOnly: false });
      continue;
    }
    const path = join(podDir, "volumes", v.name);
    if (v.emptyDir) {
      if (!existsSync(path)) {
        mkdirSync(path, { recursive: true });
        // World-writable like the kubelet's; with fsGroup, group-owned and inherited (setgid).
        chmodSync(path, fsGroup !== undefined ? 0o2777 : 0o777);
        if (fsGroup !== undefined) chownSync(path, 0, fsGroup);
      }
      volumes.set(v.name, { path, alwaysReadOnly: false });
      continue;
    }
    const { files, renewAt: at } = await volumeFiles(v, src);
    for (const p of files.keys()) checkRelativePath(p);
    writeAtomically(path, files, fsGroup);
    if (at && (!renewAt || at < renewAt)) renewAt = at;
    volumes.set(v.name, { path, alwaysReadOnly: true });
  }
  return { volumes, ...(renewAt && { renewAt }) };
}

/** The ConfigMaps and Secrets (by name) the pod's volumes and env read: what the agent watches. */
export function referencedObjects(pod: V1Pod): { configMaps: Set<string>; secrets: Set<string> } {
  const configMaps = new Set<string>();
  const secrets = new Set<string>();
  for (const v of pod.spec?.volumes ?? []) {
    if (v.configMap?.name) configMaps.add(v.configMap.name);
    if (v.secret?.secretName) secrets.add(v.secret.secretName);
    for (const s of v.projected?.sources ?? []) {
      if (s.configMap?.name) configMaps.add(s.configMap.name);
      if (s.secret?.name) secrets.add(s.secret.name);
    }
  }
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const f of c.envFrom ?? []) {
      if (f.configMapRef?.name) configMaps.add(f.configMapRef.name);
      if (f.secretRef?.name) secrets.add(f.secretRef.name);
    }
    for (const e of c.env ?? []) {
      if (e.valueFrom?.configMapKeyRef?.name) configMaps.add(e.valueFrom.configMapKeyRef.name);
      if (e.valueFrom?.secretKeyRef?.name) secrets.add(e.valueFrom.secretKeyRef.name);
    }
  }
  return { configMaps, secrets };
}
