// The lab's topology as data: which namespaces, links, addresses and nodes the ECMP paper's Fig. 5
// becomes on one machine. Pure, so every name and address is unit-tested; the lab's resources only
// carry it out.
//
//   client ── router (FRR; the node network's bridge) ── node network (network.nodeCidr)
//                                                          ├── control plane  (host .2, API :6443)
//                                                          ├── lb1…lbN        (hosts .11…, LB label)
//                                                          └── worker1…workerM (hosts .21…; reflectors)
//
// The router and the client are the lab's *site*: a second platform (its own name, node network,
// control plane and nodes) joins the site of the first (`environment.site`), and the router then
// holds one bridge per platform, as two clusters behind one data centre's (or one WAN's) router.
import {
  ConfigError,
  cidrRange,
  cidrsOverlap,
  ipv4Cidr,
  numberToIpv4,
  parseOrThrow,
  type NetworkPlan,
} from "@portable-lb/core";
import { z } from "zod";

/** `environment` of a lab stack (`portable-lb:environment`, kind "lab"). */
export const labEnvironmentSchema = z.object({
  kind: z.literal("lab"),
  /** Prefix of every namespace, and the control plane's instance name. */
  name: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,11}$/, {
      error: "must be 1-12 characters of a-z, 0-9 and '-', starting with a letter",
    })
    .default("plb-lab"),
  /**
   * The site (router and client) the platform sits behind; default its own name. A platform naming
   * another one's site joins it: one upstream router and one client for both.
   */
  site: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,11}$/, {
      error:
        "must be 1-12 characters of a-z, 0-9 and '-', starting with a letter (the other platform's name)",
    })
    .optional(),
  /** Nodes that carry the LB label and run the LB pods. */
  lbNodes: z.number().int().min(1).max(9).default(3),
  /** Nodes for everything else: the route reflectors (on the first ones) and the apps. */
  workerNodes: z.number().int().min(1).max(9).default(3),
  /** How many route reflectors (each on its own worker node); two for redundancy. */
  reflectors: z.number().int().min(1).max(2).default(2),
  /** The client's network behind the router (the paper's outside world). */
  clientCidr: ipv4Cidr.default("198.18.0.0/24"),
  /** Where the API server is reachable from this machine (127.0.0.1:<port>); 0 picks a free one. */
  apiPort: z.number().int().min(0).max(65535).default(0),
});
export type LabEnvironmentConfig = z.output<typeof labEnvironmentSchema>;

export const LB_NODE_LABEL = "portable-lb.io/load-balancer";
/** Which lab role a node has (`lb` or `worker`): the demo app selects workers with it. */
export const LAB_ROLE_LABEL = "portable-lb.io/lab-role";
export const API_PORT = 6443;

export interface LabNodePlan {
  name: string;
  role: "lb" | "worker";
  /** `ip netns` name. */
  netns: string;
  ip: string;
  /** The node's interface in the router's namespace (on this platform's bridge there). */
  fabricIface: string;
  labels: Record<string, string>;
}

export interface LabPlan {
  name: string;
  /** The site's name: the router's and the client's namespaces are named after it. */
  site: string;
  nodeCidr: string;
  prefixLength: number;
  podCidr: string;
  serviceCidr: string;
  /** The cluster DNS Service's address (the kubelets' clusterDNS), .10 of the service range as kubeadm's. */
  clusterDns: string;
  /**
   * `ip`: the router's address on this platform's node network (the BGP peer its reflectors see);
   * `routerId`: the same for every platform of the site (its client-side address), so a platform
   * joining never changes the router's BGP identity.
   */
  router: {
    netns: string;
    ip: string;
    routerId: string;
    bridge: string;
    clientIp: string;
    clientIface: string;
  };
  client: { netns: string; ip: string; cidr: string };
  controlPlane: { netns: string; ip: string; port: number; fabricIface: string; hostPort: number };
  nodes: LabNodePlan[];
  /** Where the route reflectors run: the first worker nodes. */
  reflectors: { node: string; address: string }[];
}

const host = (cidr: string, n: number) => numberToIpv4(cidrRange(cidr).first + n);

export function labPlan(
  env: LabEnvironmentConfig,
  network: Pick<NetworkPlan, "nodeCidr" | "podCidr" | "serviceCidr" | "vipPools">,
): LabPlan {
  const prefixLength = Number(network.nodeCidr.split("/")[1]);
  // Hosts .1 (router), .2 (control plane), .11-.19 (LB nodes), .21-.29 (workers).
  if (prefixLength > 27)
    throw new ConfigError(
      `network.nodeCidr: the lab needs at least a /27 for its router, control plane and nodes (got "${network.nodeCidr}"); use e.g. 192.168.100.0/24`,
    );
  const others: [string, string][] = [
    ["network.nodeCidr", network.nodeCidr],
    ["network.podCidr", network.podCidr],
    ["network.serviceCidr", network.serviceCidr],
    ...network.vipPools.map((p, i): [string, string] => [`network.vipPools[${i}].cidr`, p.cidr]),
  ];
  const clash = others.find(([, cidr]) => cidrsOverlap(cidr, env.clientCidr));
  if (clash)
    throw new ConfigError(
      `environment.clientCidr: overlaps ${clash[0]} (${clash[1]}) (got "${env.clientCidr}"); the client's network must be its own, e.g. 198.18.0.0/24`,
    );
  if (env.reflectors > env.workerNodes)
    throw new ConfigError(
      `environment.reflectors: each route reflector needs a worker node of its own (got ${env.reflectors} with ${env.workerNodes} workers); lower reflectors or raise workerNodes`,
    );

  const site = env.site ?? env.name;
  // The router holds every platform's links: names carry the platform's, `<name>-<host>` (≤ 15).
  const fabricIface = (hostPart: number) => `${env.name}-${hostPart}`;
  const node = (role: "lb" | "worker", i: number): LabNodePlan => {
    const hostPart = (role === "lb" ? 10 : 20) + i;
    return {
      name: `${role}${i}`,
      role,
      netns: `${env.name}-${role}${i}`,
      ip: host(network.nodeCidr, hostPart),
      fabricIface: fabricIface(hostPart),
      labels: { [LAB_ROLE_LABEL]: role, ...(role === "lb" && { [LB_NODE_LABEL]: "true" }) },
    };
  };
  const nodes = [
    ...Array.from({ length: env.lbNodes }, (_, i) => node("lb", i + 1)),
    ...Array.from({ length: env.workerNodes }, (_, i) => node("worker", i + 1)),
  ];
  const workers = nodes.filter((n) => n.role === "worker");
  return {
    name: env.name,
    site,
    nodeCidr: network.nodeCidr,
    prefixLength,
    podCidr: network.podCidr,
    serviceCidr: network.serviceCidr,
    clusterDns: host(network.serviceCidr, 10),
    router: {
      netns: `${site}-router`,
      ip: host(network.nodeCidr, 1),
      routerId: host(env.clientCidr, 1),
      bridge: `br-${env.name}`,
      clientIp: host(env.clientCidr, 1),
      clientIface: "vclient",
    },
    client: { netns: `${site}-client`, ip: host(env.clientCidr, 2), cidr: env.clientCidr },
    controlPlane: {
      netns: `${env.name}-cp`,
      ip: host(network.nodeCidr, 2),
      port: API_PORT,
      fabricIface: fabricIface(2),
      hostPort: env.apiPort,
    },
    nodes,
    reflectors: workers.slice(0, env.reflectors).map((w) => ({ node: w.name, address: w.ip })),
  };
}

/** Reads and checks the lab environment config; errors name the field and the fix. */
export function parseLabEnvironment(raw: unknown): LabEnvironmentConfig {
  return parseOrThrow(labEnvironmentSchema, raw, "environment");
}
