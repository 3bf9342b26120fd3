// The lab node agent's settings: each flag also reads an environment variable (LAB_AGENT_<FLAG>, and
// KUBECONFIG for --kubeconfig), so a lab runner can pass either. Checked up front: a bad value stops
// the agent before it touches the node.
import { availableParallelism, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { ipv4Address } from "@portable-lb/core/config";

export interface AgentOptions {
  nodeName: string;
  nodeIp: string;
  kubeconfig: string;
  /** The node's pod bridge (created if missing, gateway = first address of the podCIDR). */
  podBridge: string;
  /** Pod records, IPAM, volumes and container logs. */
  stateDir: string;
  /** hostPath volumes live under this folder (`<nodeRoot>/<path>`), one per node. */
  nodeRoot: string;
  /** Labels the Node carries besides the standard ones. */
  nodeLabels: Record<string, string>;
  /** Taints the Node is registered with (like the kubelet's --register-with-taints). */
  nodeTaints: NodeTaint[];
  capacity: { cpu: string; memory: string; pods: string };
  /** On SIGTERM, leave the Node object (marked not ready) instead of deleting it. */
  keepNode: boolean;
  logLevel: string;
}

export interface NodeTaint {
  key: string;
  value?: string;
  effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

export class OptionsError extends Error {}

const FLAGS = {
  "node-name": "node name (must be a DNS-1123 subdomain)",
  "node-ip": "the node's InternalIP (IPv4)",
  kubeconfig: "kubeconfig the agent uses (KUBECONFIG)",
  "pod-bridge": "the node's pod bridge (default cni0)",
  "state-dir": "folder for pod records, IPAM, volumes and logs",
  "node-root": "folder that hostPath volumes map into",
  "node-labels": "extra Node labels, k=v,k=v",
  "node-taints": "taints to register with, k=v:NoSchedule,…",
  cpu: "cpu capacity (default: this machine's CPUs)",
  memory: "memory capacity (default: this machine's memory)",
  "max-pods": "pods capacity (default 110)",
  "log-level": "pino level (default info)",
} as const;

type Flag = keyof typeof FLAGS;

export function usage(): string {
  const lines = Object.entries(FLAGS).map(
    ([f, what]) => `  --${f.padEnd(12)} ${envName(f as Flag)}: ${what}`,
  );
  return `usage: main.ts [flags]\n${lines.join("\n")}\n  --keep-node    LAB_AGENT_KEEP_NODE=true: leave the Node object when stopped`;
}

function envName(flag: Flag): string {
  return flag === "kubeconfig" ? "KUBECONFIG" : `LAB_AGENT_${flag.toUpperCase().replace(/-/g, "_")}`;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
// A label key: optional DNS-subdomain prefix, then a name of alphanumerics, '-', '_', '.'.
const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

/** "a=b,c=d" → { a: "b", c: "d" }, every key and value checked as Kubernetes checks labels. */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const part of text.split(",").map((s) => s.trim())) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const key = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? "" : part.slice(eq + 1);
    if (eq < 0 || !LABEL_KEY.test(key) || !LABEL_VALUE.test(value)) {
      throw new OptionsError(`--node-labels: "${part}" is not a valid label; write key=value, e.g. zone=a`);
    }
    labels[key] = value;
  }
  return labels;
}

/** "a=b:NoSchedule,c:NoExecute" → taints (what kubelet --register-with-taints reads). */
export function parseTaints(text: string): NodeTaint[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((part) => {
      const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec(part);
      if (!m || !LABEL_KEY.test(m[1]!) || !LABEL_VALUE.test(m[2] ?? "")) {
        throw new OptionsError(`--node-taints: "${part}" is not a taint; write key=value:NoSchedule`);
      }
      return { key: m[1]!, ...(m[2] !== undefined && { value: m[2] }), effect: m[3] as NodeTaint["effect"] };
    });
}

/** Reads flags, then environment variables, then defaults; throws OptionsError naming the flag to fix. */
export function parseAgentOptions(argv: string[], env: NodeJS.ProcessEnv): AgentOptions {
  const options = Object.fromEntries(Object.keys(FLAGS).map((f) => [f, { type: "string" as const }]));
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...options, "keep-node": { type: "boolean" } },
      strict: true,
    }));
  } catch (err) {
    throw new OptionsError(`${(err as Error).message}\n${usage()}`);
  }
  const get = (flag: Flag): string | undefined => {
    const v = values[flag];
    return typeof v === "string" && v !== "" ? v : env[envName(flag)] || undefined;
  };
  const required = (flag: Flag): string => {
    const v = get(flag);
    if (v === undefined) throw new OptionsError(`--${flag} (or ${envName(flag)}) is required\n${usage()}`);
    return v;
  };
  const nodeName = required("node-name");
  if (!DNS_SUBDOMAIN.test(nodeName) || nodeName.length > 253) {
    throw new OptionsError(`--node-name: "${nodeName}" must be a lowercase DNS subdomain, e.g. node-1`);
  }
  const nodeIp = required("node-ip");
  if (!ipv4Address.safeParse(nodeIp).success)
    throw new OptionsError(`--node-ip: "${nodeIp}" is not an IPv4 address`);
  const quantity = (flag: Flag, fallback: string): string => {
    const v = get(flag) ?? fallback;
    if (!QUANTITY.test(v)) throw new OptionsError(`--${flag}: "${v}" is not a quantity, e.g. 2 or 4Gi`);
    return v;
  };
  const maxPods = get("max-pods") ?? "110";
  if (!/^[1-9][0-9]*$/.test(maxPods)) throw new OptionsError(`--max-pods: "${maxPods}" is not a count`);
  const keepNode = values["keep-node"] === true || env.LAB_AGENT_KEEP_NODE === "true";
  const logLevel = get("log-level") ?? "info";
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new OptionsError(`--log-level: "${logLevel}" is not one of ${LOG_LEVELS.join(", ")}`);
  }
  const podBridge = get("pod-bridge") ?? "cni0";
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(podBridge)) {
    throw new OptionsError(
      `--pod-bridge: "${podBridge}" is not an interface name (1-15 of A-Z a-z 0-9 _ . -)`,
    );
  }
  return {
    nodeName,
    nodeIp,
    kubeconfig: required("kubeconfig"),
    podBridge,
    stateDir: required("state-dir"),
    nodeRoot: required("node-root"),
    nodeLabels: parseLabels(get("node-labels") ?? ""),
    nodeTaints: parseTaints(get("node-taints") ?? ""),
    capacity: {
      cpu: quantity("cpu", String(availableParallelism())),
      memory: quantity("memory", `${Math.floor(totalmem() / 1024)}Ki`),
      pods: maxPods,
    },
    keepNode,
    logLevel,
  };
}
