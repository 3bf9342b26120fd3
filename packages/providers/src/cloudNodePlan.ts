// Where a cloud environment's machines go, as data: the node network (network.nodeCidr, the VPC's
// range) split into one subnet per zone (AWS subnets are zonal; a GCP subnetwork spans its region,
// so there it is one), and each machine's name, zone and fixed private address.
// Fixed addresses make the node facts (and the API server's endpoint) known at preview.
import { ConfigError, cidrRange, numberToIpv4, problem, type RouteTargetFacts } from "@portable-lb/core";
import type { EnvironmentPlan, NodeFact } from "./provider.ts";

export interface CloudSubnet {
  /** The zone of a zonal subnet (AWS); none for a regional one (GCP). */
  zone?: string;
  cidr: string;
}

export interface CloudNodePlan {
  subnets: CloudSubnet[];
  /** The control plane first, then the LB nodes, then the workers, each spread over the zones. */
  nodes: NodeFact[];
}

export interface CloudNodePlanInput {
  name: string;
  zones: readonly string[];
  counts: { lb: number; workers: number };
  nodeCidr: string;
  /** The smallest subnet the cloud allows (AWS /28, GCP /29). */
  smallestSubnetPrefix: number;
  /** The largest VPC range the cloud allows (AWS /16); none for GCP. */
  largestPrefix?: number;
  /** One subnet per zone (AWS), or one for the region (GCP). */
  zonalSubnets: boolean;
}

/** The first host a node takes in its subnet: the clouds reserve the first few addresses. */
const FIRST_NODE_OFFSET = 10;
/** Addresses at the subnet's end the clouds reserve (broadcast, GCP's gateway spare). */
const RESERVED_AT_END = 2;

export function cloudNodePlan(o: CloudNodePlanInput): CloudNodePlan {
  const nodePrefix = Number(o.nodeCidr.split("/")[1]);
  const subnetCount = o.zonalSubnets ? o.zones.length : 1;
  const bits = Math.ceil(Math.log2(subnetCount));
  const subnetPrefix = nodePrefix + bits;
  if (o.largestPrefix !== undefined && nodePrefix < o.largestPrefix)
    throw new ConfigError(
      problem(
        "network.nodeCidr",
        `is the VPC's range, and the cloud allows at most a /${o.largestPrefix}; use a /${o.largestPrefix} or smaller`,
        o.nodeCidr,
      ),
    );
  const perSubnet = 2 ** (32 - subnetPrefix);
  const total = 1 + o.counts.lb + o.counts.workers;
  const busiest = Math.ceil(total / subnetCount);
  if (subnetPrefix > o.smallestSubnetPrefix || perSubnet - FIRST_NODE_OFFSET - RESERVED_AT_END < busiest) {
    const needed = Math.min(
      o.smallestSubnetPrefix,
      32 - Math.ceil(Math.log2(busiest + FIRST_NODE_OFFSET + RESERVED_AT_END)),
    );
    throw new ConfigError(
      problem(
        "network.nodeCidr",
        o.zonalSubnets
          ? `is too small for ${total} machines in ${subnetCount} zones (a subnet of at least /${needed} in each); use a /${needed - bits} or larger`
          : `is too small for ${total} machines; use a /${needed} or larger`,
        o.nodeCidr,
      ),
    );
  }
  const first = cidrRange(o.nodeCidr).first;
  const subnets: CloudSubnet[] = o.zonalSubnets
    ? o.zones.map((zone, i) => ({ zone, cidr: `${numberToIpv4(first + i * perSubnet)}/${subnetPrefix}` }))
    : [{ cidr: o.nodeCidr }];
  const used = subnets.map(() => 0);
  let next = 0;
  const place = (name: string, role: NodeFact["role"]): NodeFact => {
    const z = next++ % o.zones.length;
    const s = o.zonalSubnets ? z : 0;
    const address = numberToIpv4(first + s * perSubnet + FIRST_NODE_OFFSET + used[s]!++);
    return { name, role, address, zone: o.zones[z]! };
  };
  const nodes = [
    place(`${o.name}-cp`, "control-plane"),
    ...Array.from({ length: o.counts.lb }, (_, i) => place(`${o.name}-lb-${i + 1}`, "lb")),
    ...Array.from({ length: o.counts.workers }, (_, i) => place(`${o.name}-worker-${i + 1}`, "worker")),
  ];
  return { subnets, nodes };
}

/** A cloud environment's plan: its machines and subnets, and its BGP peers or its route targets. */
export function cloudEnvironmentPlan<P extends "aws" | "gcp">(
  platform: P,
  env: {
    name: string;
    zones: readonly string[];
    nodes: CloudNodePlanInput["counts"];
    bgp?: { routers: string[] };
  },
  nodeCidr: string,
  limits: Pick<CloudNodePlanInput, "zonalSubnets" | "smallestSubnetPrefix" | "largestPrefix">,
  /** Where cloud-routes mode will write when no BGP peers are given. */
  routeTargets: RouteTargetFacts,
): EnvironmentPlan & CloudNodePlan & { platform: P } {
  const plan = cloudNodePlan({ name: env.name, zones: env.zones, counts: env.nodes, nodeCidr, ...limits });
  return { platform, ...plan, ...(env.bgp ? { bgp: env.bgp } : { cloudRoutes: routeTargets }) };
}
