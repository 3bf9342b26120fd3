// A pod's volumes as host folders, as the kubelet prepares them before the runtime bind-mounts them:
// configMap, secret and projected volumes written from the data the test gives (each key a file, or
// the `items` asked for, with their modes), emptyDirs empty. Only what portable-lb's pod specs use;
// any other kind of volume, or a ConfigMap or Secret the test did not give, is an error naming it.
import type { V1KeyToPath, V1Volume } from "@kubernetes/client-node";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

export interface VolumeData {
  /** Data of the ConfigMaps and Secrets the volumes name, by name. */
  configMaps?: Record<string, Record<string, string>>;
  secrets?: Record<string, Record<string, string>>;
}

interface Source {
  kind: "ConfigMap" | "Secret";
  name?: string;
  items?: V1KeyToPath[];
  optional?: boolean;
}

function writeSource(dir: string, pod: string, source: Source, data: VolumeData, defaultMode: number): void {
  const all = (source.kind === "ConfigMap" ? data.configMaps : data.secrets)?.[source.name ?? ""];
  if (!all) {
    if (source.optional) return;
    throw new Error(
      `pod ${pod}: ${source.kind} "${source.name}" is not given; pass it in the test's ${source.kind === "ConfigMap" ? "configMaps" : "secrets"}`,
    );
  }
  const items: V1KeyToPath[] = source.items ?? Object.keys(all).map((key) => ({ key, path: key }));
  for (const item of items) {
    const value = all[item.key];
    if (value === undefined)
      throw new Error(`pod ${pod}: ${source.kind} "${source.name}" has no key "${item.key}"`);
    const file = join(dir, item.path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, value);
    chmodSync(file, item.mode ?? defaultMode);
  }
}

/** Writes volume `v` of pod `pod` into `dir` (made here). */
export function prepareVolume(dir: string, pod: string, v: V1Volume, data: VolumeData): void {
  mkdirSync(dir, { recursive: true });
  if (v.emptyDir) {
    chmodSync(dir, 0o777);
  } else if (v.configMap) {
    const { name, items, optional, defaultMode = 0o644 } = v.configMap;
    writeSource(dir, pod, { kind: "ConfigMap", name, items, optional }, data, defaultMode);
  } else if (v.secret) {
    const { secretName, items, optional, defaultMode = 0o644 } = v.secret;
    writeSource(dir, pod, { kind: "Secret", name: secretName, items, optional }, data, defaultMode);
  } else if (v.projected) {
    const defaultMode = v.projected.defaultMode ?? 0o644;
    for (const s of v.projected.sources ?? []) {
      if (s.configMap) writeSource(dir, pod, { kind: "ConfigMap", ...s.configMap }, data, defaultMode);
      else if (s.secret) writeSource(dir, pod, { kind: "Secret", ...s.secret }, data, defaultMode);
      else
        throw new Error(`pod ${pod}: volume "${v.name}" projects a source other than a ConfigMap or Secret`);
    }
  } else {
    throw new Error(`pod ${pod}: volume "${v.name}" is of a kind this harness does not prepare`);
  }
}
