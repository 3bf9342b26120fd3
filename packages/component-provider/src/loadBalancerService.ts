// LoadBalancerService for Pulumi programs in other languages. Pulumi infers this package's schema,
// and so the other languages' SDKs, from the Args interface below, and it reads only plain types,
// interfaces, string enums and pulumi.Input of those. Core's own Args do not fit: Kubernetes'
// ServicePort (targetPort: number | string), an inline "Cluster" | "Local" and an inline object.
// So this component restates those fields in that form and hands the args, unchanged, to core's
// LoadBalancerService, which does the work and every check.
import * as pulumi from "@pulumi/pulumi";
import { LoadBalancerService as CoreLoadBalancerService } from "@portable-lb/core";

/** How the Service spreads VIP traffic over its endpoints (spec.externalTrafficPolicy). */
export const ExternalTrafficPolicy = {
  /** Over every endpoint in the cluster (the default). */
  Cluster: "Cluster",
  /** Only to endpoints on the node the traffic reached; keeps the client's source address. */
  Local: "Local",
} as const;
export type ExternalTrafficPolicy = (typeof ExternalTrafficPolicy)[keyof typeof ExternalTrafficPolicy];

/** Which flows a handover relays to the old platform (core's LoadBalancerService `handover.relay`). */
export const HandoverRelay = {
  /** Every flow the LB pods did not see start, new connections too (while both platforms announce). */
  All: "all",
  /** Only TCP connections begun before (once the old platform withdrew); the default. */
  Established: "established",
} as const;
export type HandoverRelay = (typeof HandoverRelay)[keyof typeof HandoverRelay];

/** A port of the Service. */
export interface ServicePort {
  /** The port's name, e.g. "http"; required when the Service has several. */
  name?: string;
  /** The port clients connect to on the VIP. */
  port: number;
  /** The pods' port; default: port. */
  targetPort?: number;
  /** TCP (the default), UDP or SCTP. */
  protocol?: string;
}

/** A VIP pool, as the platform stack's `vipPools` output lists it. */
export interface VipPool {
  /** The pool's name, which `pool` refers to. */
  name: string;
  /** Its IPv4 range, e.g. 10.1.1.0/24. */
  cidr: string;
  /** Skip each /24's .0 and .255 addresses. */
  avoidBuggyIps?: boolean;
  /** false: only Services that name this pool (or request one of its addresses) get its addresses. */
  autoAssign?: boolean;
}

/** LB node addresses of the two platforms during a migration by BGP (core's LoadBalancerService). */
export interface Handover {
  /** The old platform's LB node addresses. */
  from?: string[];
  /** Which flows go to `from` (default established). */
  relay?: HandoverRelay;
  /** The new platform's LB node and LB pod addresses. */
  acceptFrom?: string[];
}

export interface LoadBalancerServiceArgs {
  /** The namespace of the Service. */
  namespace: pulumi.Input<string>;
  /** The Service's name. */
  name: string;
  /** Labels of the pods behind the VIP. */
  selector: Record<string, string>;
  /** The Service's ports. */
  ports: ServicePort[];
  /** The platform's VIP pools (its stack's `vipPools` output). */
  vipPools: VipPool[];
  /** The platform's load-balancer class (its stack's `loadBalancerClass` output). */
  loadBalancerClass?: string;
  /** Specific VIPs to ask for, each inside a pool; omit to get one allocated. */
  vips?: string[];
  /** Allocate from this pool. */
  pool?: string;
  /** Cluster (the default) or Local. */
  externalTrafficPolicy?: ExternalTrafficPolicy;
  /** Only clients in these IPv4 ranges reach the VIPs; omit to admit every client. */
  sourceRanges?: string[];
  /** false: keep serving the VIPs but stop announcing them (a migration's "move traffic" step). */
  announce?: boolean;
  /** A migration by BGP between platforms that announce the same VIP. */
  handover?: Handover;
}

/** A Service of type LoadBalancer with the platform's class, given a VIP from its pools. */
export class LoadBalancerService extends pulumi.ComponentResource {
  /** The VIP(s) the controller assigned (status.loadBalancer.ingress). */
  public readonly ingress: pulumi.Output<string[]>;

  constructor(name: string, args: LoadBalancerServiceArgs, opts?: pulumi.ComponentResourceOptions) {
    // The type token the schema gives the component: <package>:index:<class>.
    super("portable-lb:index:LoadBalancerService", name, {}, opts);
    this.ingress = new CoreLoadBalancerService(name, args, { parent: this }).ingress;
    this.registerOutputs({ ingress: this.ingress });
  }
}
