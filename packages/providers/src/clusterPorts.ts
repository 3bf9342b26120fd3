// What the data path needs open, as data both clouds' firewalls are made from: between the cluster's
// machines, from the upstream routers (BGP mode), and from outside only the VIPs' ports (LB nodes)
// and the API server (from the ranges the user lists). Everything else stays closed.

export interface PortRange {
  protocol: "tcp" | "udp";
  from: number;
  to: number;
  /** Why it is open (the rule's description). */
  why: string;
}

const BGP: PortRange = { protocol: "tcp", from: 179, to: 179, why: "BGP sessions" };
const BFD: PortRange = { protocol: "udp", from: 3784, to: 3785, why: "BFD (single hop and multihop)" };

/** flannel's VXLAN port where flannel.vxlan.port is unset (the kernel's default). */
export const FLANNEL_VXLAN_PORT = 8472;

/** Open between the cluster's machines; flannel's VXLAN on the port the cluster's flannel uses. */
export function clusterPorts(flannelVxlanPort = FLANNEL_VXLAN_PORT): PortRange[] {
  return [
    { protocol: "tcp", from: 6443, to: 6443, why: "the API server" },
    { protocol: "tcp", from: 10250, to: 10250, why: "the kubelets' API (logs, exec, metrics)" },
    // Pod traffic between nodes, VIP traffic forwarded to backends included.
    { protocol: "udp", from: flannelVxlanPort, to: flannelVxlanPort, why: "flannel's VXLAN" },
    { protocol: "tcp", from: 179, to: 179, why: "BGP between the LB speakers and the route reflectors" },
    BFD,
  ];
}

/** Open to the upstream routers, in BGP mode: they peer with the route reflectors. */
export const ROUTER_PORTS: readonly PortRange[] = [BGP, BFD];

export const API_PORT_RANGE: PortRange = { protocol: "tcp", from: 6443, to: 6443, why: "the API server" };

/** The VIPs' ports, open on the LB nodes to the VIPs' clients. */
export function vipPortRanges(ports: readonly number[]): PortRange[] {
  return ports.map((p) => ({ protocol: "tcp", from: p, to: p, why: `VIP port ${p}` }));
}

/** Who may reach a cloud cluster, as its firewall takes it (environmentFields.ts cloudAccessShape). */
export interface ClusterAccess {
  clusterName: string;
  apiAccessCidrs: readonly string[];
  vipPorts: readonly number[];
  vipAccessCidrs: readonly string[];
  /** BGP mode: the upstream routers. */
  routers?: readonly string[];
  /** flannel.vxlan.port, when set: the machines' firewall opens it instead of 8472. */
  flannelVxlanPort?: number;
}
