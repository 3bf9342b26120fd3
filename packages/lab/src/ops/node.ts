// One lab node: a namespace on the node network, forwarding, with the lab node agent (../agent)
// registering the Node and running the pods bound to it. The agent authenticates as the node
// (system:node:<name> in system:nodes, a certificate from the control plane's CA), so the API
// server's Node authorizer limits it to its own Node and pods, as a kubelet.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { extname, join } from "node:path";
import { issueClientCert } from "../controlPlane/certificates.ts";
import { renderKubeconfig } from "../controlPlane/kubeconfig.ts";
import { API_PORT, type LabNodePlan, type LabPlan } from "../labPlan.ts";
import { deleteNamespacesNow, stopRecorded, type ProcessRecord } from "../netns/netnsLab.ts";
import { runs, waitUntil } from "../processes.ts";
import {
  controlPlaneDir,
  freshNamespace,
  labDir,
  labNamespace,
  namespaceExists,
  plugIntoNodeNetwork,
} from "./fabric.ts";

export interface NodeSpec {
  plan: LabPlan;
  node: string;
  /** The control plane's instance: a new control plane means new node credentials and a new agent. */
  controlPlane: string;
  /** This machine's admin kubeconfig file, to wait for the Node to be Ready. */
  adminKubeconfig: string;
}

export interface NodeState {
  agent: ProcessRecord;
}

/** How long a stopping agent gets to stop its pods (their grace periods) and delete its Node. */
const AGENT_STOP_MS = 60_000;
const READY_TIMEOUT_MS = 120_000;

function nodeOf(plan: LabPlan, name: string): LabNodePlan {
  const node = plan.nodes.find((n) => n.name === name);
  if (!node) throw new Error(`lab ${plan.name}: no node ${name} in the plan`);
  return node;
}

/** lb-image's launchers (`portable-lb-controller` …): the LB pods' commands, found by the agent on PATH. */
function lbImageBin(): string {
  return join(__dirname, "../../../../lb-image/bin");
}

export async function create(spec: NodeSpec): Promise<NodeState> {
  const { plan } = spec;
  const node = nodeOf(plan, spec.node);
  await remove(spec, undefined);
  const ns = await freshNamespace(plan, node.netns, true);
  await plugIntoNodeNetwork(plan, ns, node.fabricIface, node.ip);

  const dir = join(labDir(plan), node.name);
  mkdirSync(dir, { recursive: true });
  const pki = join(controlPlaneDir(plan), "pki");
  const user = `system:node:${node.name}`;
  const cert = await issueClientCert(pki, { name: `node-${node.name}`, user, groups: ["system:nodes"] });
  const kubeconfig = join(dir, "kubeconfig");
  const server = `https://${plan.controlPlane.ip}:${API_PORT}`;
  const rendered = renderKubeconfig({
    server,
    caCertFile: join(pki, "ca.crt"),
    clientCertFile: cert.cert,
    clientKeyFile: cert.key,
    user,
  });
  writeFileSync(kubeconfig, rendered, { mode: 0o600 });

  const records: ProcessRecord[] = [];
  const agent = join(__dirname, "..", "agent", `main${extname(__filename)}`);
  const labels = Object.entries(node.labels).map(([k, v]) => `${k}=${v}`);
  await labNamespace(plan, node.netns, records).spawn(
    "agent",
    process.execPath,
    [
      "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
      agent,
      ...["--node-name", node.name, "--node-ip", node.ip, "--kubeconfig", kubeconfig],
      ...[
        "--state-dir",
        join(dir, "state"),
        "--node-root",
        join(dir, "root"),
        "--node-labels",
        labels.join(","),
      ],
      // A node may not delete its own Node (the Node authorizer, as for kubelets): remove() does.
      "--keep-node",
    ],
    {
      marker: `${agent} --node-name ${node.name} `,
      logFile: join(dir, "agent.log"),
      env: { PATH: `${lbImageBin()}:${process.env.PATH ?? ""}` },
    },
  );
  const state = { agent: records[0]! };
  if (!(await nodeReady(spec.adminKubeconfig, node.name, state.agent))) {
    await remove(spec, state);
    throw new Error(
      `lab ${plan.name}: node ${node.name} was not Ready within ${READY_TIMEOUT_MS / 1000} s; see ${join(dir, "agent.log")}`,
    );
  }
  return state;
}

function adminApi(adminKubeconfig: string): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromFile(adminKubeconfig);
  return kc.makeApiClient(CoreV1Api);
}

async function nodeReady(adminKubeconfig: string, name: string, agent: ProcessRecord): Promise<boolean> {
  const api = adminApi(adminKubeconfig);
  return waitUntil(
    async () => {
      if (!runs(agent.pid, agent.marker)) return true; // reported by the caller's check below
      try {
        const n = await api.readNode({ name });
        return n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
      } catch {
        return false;
      }
    },
    READY_TIMEOUT_MS,
    500,
  ).then((ok) => ok && runs(agent.pid, agent.marker));
}

export function healthy(spec: NodeSpec, state: NodeState): boolean {
  return namespaceExists(nodeOf(spec.plan, spec.node).netns) && runs(state.agent.pid, state.agent.marker);
}

export async function remove(spec: NodeSpec, state: NodeState | undefined): Promise<void> {
  const node = nodeOf(spec.plan, spec.node);
  // SIGTERM: the agent stops its pods within their grace periods.
  if (state) await stopRecorded(state.agent, AGENT_STOP_MS);
  deleteNamespacesNow([node.netns], `lab ${spec.plan.name}`);
  // The Node goes too (the control plane may already be gone with the whole lab: nothing to do then).
  if (existsSync(spec.adminKubeconfig))
    await adminApi(spec.adminKubeconfig)
      .deleteNode({ name: node.name })
      .catch(() => undefined);
  rmSync(join(labDir(spec.plan), node.name), { recursive: true, force: true });
}
