// flanneld on a lab node, run as the kube-flannel DaemonSet's container runs it on a real node: in
// the node's network namespace (its host network), with the DaemonSet's args and env, reaching the
// API server through an ApiBridge with the credentials given. The nodes of a lab share one
// filesystem, so each gets its own subnet file (the DaemonSet's /run/flannel/subnet.env).
import { cidrRange, numberToIpv4 } from "@portable-lb/core/config";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { type LabNamespace, type LabProcess, NetnsError, requireCommand, waitUntil } from "@portable-lb/lab";
import { ApiBridge } from "./apiBridge.ts";

const FLANNELD_FIX = "run scripts/bootstrap.sh (it builds flanneld) and run through scripts/with-tools";

/** What flanneld writes to its subnet file for the CNI plugin. */
export interface SubnetEnv {
  /** FLANNEL_NETWORK: the cluster's pod CIDR. */
  network: string;
  /** FLANNEL_SUBNET: the node's first pod address with its subnet's prefix length (the pod bridge's address). */
  subnet: string;
  mtu: number;
  ipMasq: boolean;
}

export function parseSubnetEnv(text: string): SubnetEnv {
  const vars = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) vars.set(m[1]!, m[2]!);
  }
  const get = (key: string): string => {
    const value = vars.get(key);
    if (value === undefined) throw new Error(`flannel subnet file: no ${key} in:\n${text}`);
    return value;
  };
  return {
    network: get("FLANNEL_NETWORK"),
    subnet: get("FLANNEL_SUBNET"),
    mtu: Number(get("FLANNEL_MTU")),
    ipMasq: get("FLANNEL_IPMASQ") === "true",
  };
}

/** The k-th address of a prefix, with its length: hostAddress("10.244.3.0/24", 1) = "10.244.3.1/24". */
export function hostAddress(cidr: string, k: number): string {
  const { first, last } = cidrRange(cidr);
  if (!Number.isInteger(k) || k < 0 || first + k > last) {
    throw new Error(`hostAddress: ${cidr} has no address number ${k}`);
  }
  return `${numberToIpv4(first + k)}/${cidr.split("/")[1]}`;
}

export interface FlannelNodeOptions {
  /** The node's network namespace: flanneld runs on the host network. */
  ns: LabNamespace;
  /** The node's interface on the node network (--iface): its address is what other nodes route through. */
  uplink: string;
  /** Kubeconfig with flanneld's credentials; bridged into the namespace. */
  kubeconfig: string;
  /** net-conf.json, as the DaemonSet mounts it from its ConfigMap. */
  netConf: string;
  /** The DaemonSet container's args; the paths and the interface are added per node. */
  args: readonly string[];
  /** The DaemonSet container's env, resolved as the kubelet would (POD_NAME, POD_NAMESPACE, …). */
  env: NodeJS.ProcessEnv;
  /** Where the subnet file goes (the lab's folder). */
  dir: string;
}

export class FlannelNode {
  readonly o: FlannelNodeOptions;
  readonly subnetFile: string;
  readonly #bridge: ApiBridge;
  process: LabProcess | undefined;

  private constructor(o: FlannelNodeOptions, bridge: ApiBridge) {
    this.o = o;
    this.#bridge = bridge;
    this.subnetFile = join(o.dir, `${o.ns.name}-subnet.env`);
  }

  static async create(o: FlannelNodeOptions): Promise<FlannelNode> {
    requireCommand("flanneld", FLANNELD_FIX);
    return new FlannelNode(o, await ApiBridge.open(o.ns, o.kubeconfig));
  }

  /**
   * Starts flanneld (again); resolves once it has written its subnet file, which it does at every
   * start after taking its node's lease and setting up the backend and the iptables rules.
   */
  async start(timeoutMs = 30_000): Promise<LabProcess> {
    const since = Date.now();
    const proc = await this.o.ns.spawn(
      "flanneld",
      "flanneld",
      [
        ...this.o.args,
        `--kubeconfig-file=${this.#bridge.kubeconfigFile}`,
        `--iface=${this.o.uplink}`,
        `--net-config-path=${this.o.netConf}`,
        `--subnet-file=${this.subnetFile}`,
      ],
      { env: this.o.env },
    );
    // flanneld needs a second or more before it writes, far more than the file clock's granularity.
    const written = () => existsSync(this.subnetFile) && statSync(this.subnetFile).mtimeMs > since;
    const ready = await waitUntil(() => !proc.running() || written(), timeoutMs, 100);
    if (!ready || !proc.running()) {
      await proc.stop();
      const what = ready ? "exited" : `did not write ${this.subnetFile} within ${timeoutMs / 1000} s`;
      throw new NetnsError(
        `${this.o.ns.netns}: flanneld ${what}; last lines of its log:\n${proc.lastLines()}`,
      );
    }
    this.process = proc;
    return proc;
  }

  subnetEnv(): SubnetEnv {
    return parseSubnetEnv(readFileSync(this.subnetFile, "utf8"));
  }

  /** The node's routes through a gateway, destination → gateway: host-gw's routes to other nodes' subnets. */
  async gatewayRoutes(): Promise<Record<string, string>> {
    const routes = JSON.parse(await this.o.ns.ip("-j", "-4", "route", "show")) as {
      dst: string;
      gateway?: string;
    }[];
    return Object.fromEntries(routes.flatMap((r) => (r.gateway ? [[r.dst, r.gateway]] : [])));
  }

  /** Stops flanneld and closes the API bridge. */
  async close(): Promise<void> {
    await this.process?.stop();
    await this.#bridge.close();
  }
}
