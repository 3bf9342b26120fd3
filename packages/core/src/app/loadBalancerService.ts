// What an app stack uses to get a VIP: an ordinary Service of type LoadBalancer with portable-lb's
// class, optionally asking for specific addresses, checked against the platform's VIP pools at
// preview time (the controller checks again at run time, for Services made without this).
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import {
  ANNOUNCE_ANNOTATION,
  HANDOVER_ACCEPT_FROM_ANNOTATION,
  HANDOVER_FROM_ANNOTATION,
  HANDOVER_RELAY_ANNOTATION,
  HANDOVER_RELAYS,
  REQUESTED_VIPS_ANNOTATION,
  VIP_POOL_ANNOTATION,
} from "../config/annotations.ts";
import { cidrContains, ipv4Address, ipv4Cidr } from "../config/cidr.ts";
import { DEFAULT_LOAD_BALANCER_CLASS } from "../config/lbConfig.ts";
import { autoAssigns, vipPoolSchema } from "../config/vipPool.ts";
import { ConfigError, parseOrThrow } from "../validation.ts";

export interface LoadBalancerServiceArgs {
  namespace: pulumi.Input<string>;
  /** The Service's name. */
  name: string;
  /** Pods behind the VIP. */
  selector: Record<string, string>;
  ports: k8s.types.input.core.v1.ServicePort[];
  /**
   * The platform's VIP pools (the PortableCluster `vipPools` output, e.g. via a StackReference);
   * `avoidBuggyIps` may be left out, as in the platform's own config.
   */
  vipPools: z.input<typeof vipPoolSchema>[];
  /** The platform's class (PortableCluster `loadBalancerClass`). */
  loadBalancerClass?: string;
  /** Specific VIPs to ask for; each must lie in a pool. Omit to get one allocated. */
  vips?: string[];
  /** Allocate from this pool. */
  pool?: string;
  /** "Local" keeps the client's source address; "Cluster" (default) spreads over all endpoints. */
  externalTrafficPolicy?: "Cluster" | "Local";
  /**
   * Only clients in these IPv4 ranges reach the VIPs (spec.loadBalancerSourceRanges; the LB pods drop
   * the rest, in either data-plane mode). Omit to admit every client.
   */
  sourceRanges?: string[];
  /**
   * false: keep serving the VIPs but stop announcing them (BGP) or routing them (cloud routes), so
   * traffic moves to another platform that announces them too (a migration's "move traffic" step).
   * The VIPs stay in the Service's status, and the LB pods' rules stay. Default true.
   */
  announce?: boolean;
  /**
   * A migration by BGP between platforms that announce the same VIP (README, "Migration"): flows
   * the router moves to the new platform's LB pods mid-flight are relayed to the old platform's LB
   * nodes, which serve them as before. nftables DSR only (a Warning Event `HandoverUnsupported`
   * otherwise).
   */
  handover?: {
    /** On the new platform: the old platform's LB node addresses, where flows are relayed. */
    from?: string[];
    /**
     * With `from`: "all" relays every flow these LB pods did not see start, new connections too
     * (while both platforms announce the VIP); "established" (default) only TCP connections that
     * started before (after the old platform withdrew the VIP).
     */
    relay?: (typeof HANDOVER_RELAYS)[number];
    /**
     * On the old platform: the new platform's LB node and LB pod addresses, whose relayed flows
     * are taken.
     */
    acceptFrom?: string[];
  };
}

const argsSchema = z.object({
  vipPools: z
    .array(vipPoolSchema)
    .min(1, { error: "needs the platform's VIP pools (PortableCluster.vipPools)" }),
  vips: z.array(ipv4Address).optional(),
  pool: z.string().optional(),
  sourceRanges: z
    .array(ipv4Cidr)
    .min(1, { error: "admits no client; omit it to admit every one" })
    .optional(),
  announce: z.boolean().optional(),
  handover: z
    .strictObject({
      from: z.array(ipv4Address).min(1, { error: "names no LB node; omit it" }).optional(),
      relay: z.enum(HANDOVER_RELAYS).optional(),
      acceptFrom: z.array(ipv4Address).min(1, { error: "names no LB node; omit it" }).optional(),
    })
    .optional(),
});

export class LoadBalancerService extends pulumi.ComponentResource {
  public readonly service: k8s.core.v1.Service;
  /** The VIP(s) the controller assigned (status.loadBalancer.ingress). */
  public readonly ingress: pulumi.Output<string[]>;

  constructor(name: string, args: LoadBalancerServiceArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:core:LoadBalancerService", name, {}, opts);
    const a = parseOrThrow(argsSchema, args, "service");
    (a.vips ?? []).forEach((vip, i) => {
      const pool = a.vipPools.find((p) => cidrContains(p.cidr, vip));
      if (!pool) {
        throw new ConfigError(
          `service.vips[${i}]: is outside every VIP pool (${a.vipPools.map((p) => `${p.name} ${p.cidr}`).join(", ")}) (got "${vip}"); pick an address inside a pool, or leave vips unset to get one allocated`,
        );
      }
      if (a.pool !== undefined && pool.name !== a.pool) {
        throw new ConfigError(
          `service.vips[${i}]: lies in pool ${pool.name}, not in the requested pool ${a.pool} (got "${vip}"); drop one of the two`,
        );
      }
    });
    if (a.pool !== undefined && !a.vipPools.some((p) => p.name === a.pool)) {
      throw new ConfigError(
        `service.pool: no such VIP pool (got "${a.pool}"); use one of: ${a.vipPools.map((p) => p.name).join(", ")}`,
      );
    }
    if (!a.vips?.length && a.pool === undefined && !a.vipPools.some(autoAssigns)) {
      throw new ConfigError(
        `service.pool: is unset, and every VIP pool has autoAssign: false (${a.vipPools.map((p) => p.name).join(", ")}), so the Service would get no address; set pool to one of them, or vips`,
      );
    }
    if (a.handover?.relay !== undefined && !a.handover.from)
      throw new ConfigError(
        `service.handover.relay: says which flows go to handover.from, which is unset (got "${a.handover.relay}"); set from to the old platform's LB node addresses, or drop relay`,
      );
    const annotations = {
      ...(a.vips?.length && { [REQUESTED_VIPS_ANNOTATION]: a.vips.join(",") }),
      ...(a.pool !== undefined && { [VIP_POOL_ANNOTATION]: a.pool }),
      ...(a.announce === false && { [ANNOUNCE_ANNOTATION]: "false" }),
      ...(a.handover?.from && { [HANDOVER_FROM_ANNOTATION]: a.handover.from.join(",") }),
      ...(a.handover?.relay && { [HANDOVER_RELAY_ANNOTATION]: a.handover.relay }),
      ...(a.handover?.acceptFrom && { [HANDOVER_ACCEPT_FROM_ANNOTATION]: a.handover.acceptFrom.join(",") }),
    };
    this.service = new k8s.core.v1.Service(
      name,
      {
        metadata: { name: args.name, namespace: args.namespace, annotations },
        spec: {
          type: "LoadBalancer",
          loadBalancerClass: args.loadBalancerClass ?? DEFAULT_LOAD_BALANCER_CLASS,
          selector: args.selector,
          ports: args.ports,
          externalTrafficPolicy: args.externalTrafficPolicy ?? "Cluster",
          ...(a.sourceRanges && { loadBalancerSourceRanges: a.sourceRanges }),
          // Our LB pods reach endpoints directly over the pod network: no node ports needed.
          allocateLoadBalancerNodePorts: false,
        },
      },
      { parent: this },
    );
    this.ingress = this.service.status.loadBalancer.ingress.apply((ing) =>
      (ing ?? []).map((i) => i.ip ?? i.hostname ?? ""),
    );
    this.registerOutputs({ ingress: this.ingress });
  }
}
