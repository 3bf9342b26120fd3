// A container's environment as the kubelet builds it: envFrom first, then env in order (each value
// may use $(VAR) of the ones before it), then the API server's address (no kube-proxy in the lab, so
// KUBERNETES_SERVICE_HOST/PORT point at the API server itself, not at a Service VIP); the same
// expansion applies to command and args. Pure: ConfigMaps and Secrets come in through lookups.
import type { V1Container, V1Pod, V1ResourceRequirements } from "@kubernetes/client-node";
import { divideUp, parseQuantity } from "./quantity.ts";

/** A pod cannot start until this is fixed (the kubelet's CreateContainerConfigError). */
export class ContainerConfigError extends Error {}

/** What a pod knows only once it runs. */
export interface PodRuntimeFields {
  podIP: string;
  podIPs: string[];
  hostIP: string;
  hostIPs: string[];
}

export interface Allocatable {
  /** cores */
  cpu: number;
  /** bytes */
  memory: number;
  /** bytes */
  "ephemeral-storage": number;
}

export interface EnvContext {
  pod: V1Pod;
  runtime: PodRuntimeFields;
  /** Data of a ConfigMap in the pod's namespace (binaryData as UTF-8), undefined if it does not exist. */
  configMap: (name: string) => Record<string, string> | undefined;
  /** Decoded data of a Secret in the pod's namespace, undefined if it does not exist. */
  secret: (name: string) => Record<string, string> | undefined;
  allocatable: Allocatable;
  apiServer: { host: string; port: number };
}

/**
 * Replaces $(NAME) with `lookup(NAME)` where it is defined, `$$` with `$`, and leaves anything else
 * as written (Kubernetes' expansion rules: an unknown reference stays literally).
 */
export function expandVars(input: string, lookup: (name: string) => string | undefined): string {
  let out = "";
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (c !== "$" || i + 1 >= input.length) {
      out += c;
      continue;
    }
    const next = input[i + 1];
    if (next === "$") {
      out += "$";
      i++;
    } else if (next === "(") {
      const close = input.indexOf(")", i + 2);
      if (close < 0) {
        out += input.slice(i);
        break;
      }
      const name = input.slice(i + 2, close);
      const value = lookup(name);
      out += value ?? `$(${name})`;
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

/** `metadata.labels['a.b/c']` → ["labels", "a.b/c"]. */
function subscript(path: string): [string, string] | undefined {
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  return m ? [m[1]!, m[2]!] : undefined;
}

/** The value of a downward-API fieldRef that env vars accept. */
export function fieldRefValue(pod: V1Pod, fieldPath: string, runtime: PodRuntimeFields): string {
  const meta = pod.metadata ?? {};
  const sub = subscript(fieldPath);
  if (sub) {
    const map = sub[0] === "labels" ? meta.labels : meta.annotations;
    return map?.[sub[1]] ?? "";
  }
  switch (fieldPath) {
    case "metadata.name":
      return meta.name ?? "";
    case "metadata.namespace":
      return meta.namespace ?? "";
    case "metadata.uid":
      return meta.uid ?? "";
    case "spec.nodeName":
      return pod.spec?.nodeName ?? "";
    case "spec.serviceAccountName":
      return pod.spec?.serviceAccountName ?? "";
    case "status.podIP":
      return runtime.podIP;
    case "status.podIPs":
      return runtime.podIPs.join(",");
    case "status.hostIP":
      return runtime.hostIP;
    case "status.hostIPs":
      return runtime.hostIPs.join(",");
    default:
      throw new ContainerConfigError(`unsupported fieldRef fieldPath "${fieldPath}"`);
  }
}

/** The downward API's metadata.labels / metadata.annotations file: sorted `key="value"` lines. */
export function formatMap(map: Record<string, string> | undefined): string {
  return Object.keys(map ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(map![k])}`)
    .join("\n");
}

/**
 * A resourceFieldRef value: the container's limit (the node's allocatable when it sets none, as the
 * kubelet does) or request, divided by `divisor` and rounded up.
 */
export function resourceFieldValue(
  resources: V1ResourceRequirements | undefined,
  resource: string,
  divisor: string | undefined,
  allocatable: Allocatable,
): string {
  const m = /^(limits|requests)\.(cpu|memory|ephemeral-storage)$/.exec(resource);
  if (!m) throw new ContainerConfigError(`unsupported resourceFieldRef resource "${resource}"`);
  const [, kind, name] = m as unknown as [string, "limits" | "requests", keyof Allocatable];
  const set = resources?.[kind]?.[name];
  const value = set !== undefined ? parseQuantity(set) : kind === "limits" ? allocatable[name] : 0;
  return divideUp(value, parseQuantity(divisor ?? "1"));
}

function containerNamed(pod: V1Pod, name: string): V1Container {
  const all = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  const c = all.find((x) => x.name === name);
  if (!c) throw new ContainerConfigError(`resourceFieldRef names container "${name}", which this pod lacks`);
  return c;
}

/** The API server as in-cluster clients find it (client-go's rest.InClusterConfig reads these). */
export function apiServerEnv(apiServer: { host: string; port: number }): Record<string, string> {
  return {
    KUBERNETES_SERVICE_HOST: apiServer.host,
    KUBERNETES_SERVICE_PORT: String(apiServer.port),
    KUBERNETES_SERVICE_PORT_HTTPS: String(apiServer.port),
  };
}

/**
 * The container's variables from the pod spec, in the kubelet's precedence: the spec's own
 * variables win over the API server's. Throws ContainerConfigError for a missing, non-optional
 * ConfigMap, Secret or key.
 */
export function containerEnv(container: V1Container, ctx: EnvContext): Map<string, string> {
  const service = apiServerEnv(ctx.apiServer);
  const own = new Map<string, string>();
  const lookup = (name: string) => own.get(name) ?? service[name];

  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? "";
    const ref = from.configMapRef ?? from.secretRef;
    if (!ref) continue;
    const kind = from.configMapRef ? "ConfigMap" : "Secret";
    const data = from.configMapRef ? ctx.configMap(ref.name!) : ctx.secret(ref.name!);
    if (data === undefined) {
      if (ref.optional) continue;
      throw new ContainerConfigError(`${kind} "${ref.name}" not found`);
    }
    // A name with "=" cannot be an environment variable; the kubelet skips such keys too.
    for (const [k, v] of Object.entries(data)) if (!`${prefix}${k}`.includes("=")) own.set(prefix + k, v);
  }

  for (const e of container.env ?? []) {
    const from = e.valueFrom;
    if (!from) {
      own.set(e.name, expandVars(e.value ?? "", lookup));
      continue;
    }
    let value: string | undefined;
    if (from.fieldRef) {
      value = fieldRefValue(ctx.pod, from.fieldRef.fieldPath, ctx.runtime);
    } else if (from.resourceFieldRef) {
      const r = from.resourceFieldRef;
      const target = r.containerName ? containerNamed(ctx.pod, r.containerName) : container;
      value = resourceFieldValue(target.resources, r.resource, r.divisor, ctx.allocatable);
    } else if (from.configMapKeyRef || from.secretKeyRef) {
      const ref = (from.configMapKeyRef ?? from.secretKeyRef)!;
      const kind = from.configMapKeyRef ? "ConfigMap" : "Secret";
      const data = from.configMapKeyRef ? ctx.configMap(ref.name!) : ctx.secret(ref.name!);
      value = data?.[ref.key];
      if (value === undefined) {
        if (ref.optional) continue;
        throw new ContainerConfigError(
          data === undefined
            ? `${kind} "${ref.name}" not found (env ${e.name})`
            : `key "${ref.key}" not found in ${kind} "${ref.name}" (env ${e.name})`,
        );
      }
    } else {
      throw new ContainerConfigError(`env ${e.name}: unsupported valueFrom`);
    }
    own.set(e.name, value);
  }

  const env = new Map(Object.entries(service));
  for (const [k, v] of own) env.set(k, v);
  return env;
}

/** command and args with $(VAR) expanded against the container's environment. */
export function expandCommand(container: V1Container, env: Map<string, string>): string[] {
  const lookup = (name: string) => env.get(name);
  return [...(container.command ?? []), ...(container.args ?? [])].map((s) => expandVars(s, lookup));
}
