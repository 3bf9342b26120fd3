// Route reflectors (ECMP paper, section 3.3): BIRD on chosen nodes' host network, so the upstream
// router peers with a fixed node address, while LB speakers connect from any pod address as
// dynamic neighbors. They pass every path on (add-path), so the router learns each LB as a next hop.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { renderRouteReflectorBird } from "../bgp/routeReflectorBird.ts";
import { asn, bfdSchema, bgpTimersSchema } from "../config/bgpSettings.ts";
import { ipv4Address, ipv4Cidr } from "../config/cidr.ts";
import { CONFIG_HASH_ANNOTATION, configHash } from "../configHash.ts";
import { standardLabels } from "../labels.ts";
import { lbImageRef } from "../config/lbImageRef.ts";
import { LB_PRIORITY_CLASS } from "../loadBalancer/loadBalancer.ts";
import { parseOrThrow } from "../validation.ts";
import { RR_PATHS, RR_SERVICE_ACCOUNT, routeReflectorPodSpec } from "./podSpec.ts";

export const RR_APP_LABEL = "portable-lb-route-reflector";

export const reflectorsSchema = z
  .array(
    z.strictObject({
      /** The node (kubernetes.io/hostname) the reflector runs on. */
      node: z.string().min(1, { error: "must name a node" }),
      /** That node's address, which the upstream router peers with. */
      address: ipv4Address,
    }),
  )
  .min(1, {
    error:
      "needs at least one route reflector (two for redundancy), e.g. [{ node: 'rr1', address: '10.0.0.5' }]",
  })
  .superRefine((rrs, ctx) => {
    rrs.forEach((rr, i) => {
      const j = rrs.findIndex((o) => o.node === rr.node);
      if (j < i)
        ctx.addIssue({
          code: "custom",
          path: [i, "node"],
          message: `is already used by reflectors[${j}]; run each reflector on its own node`,
        });
      const k = rrs.findIndex((o) => o.address === rr.address);
      if (k < i)
        ctx.addIssue({
          code: "custom",
          path: [i, "address"],
          message: `is already used by reflectors[${k}]; each reflector needs its own address`,
        });
    });
  });

const argsSchema = z.object({
  asn,
  reflectors: reflectorsSchema,
  speakerRanges: z.array(ipv4Cidr).min(1, { error: "needs the pod CIDR the LB speakers connect from" }),
  vipPrefixes: z
    .array(ipv4Cidr)
    .min(1, { error: "needs the VIP pools, the only prefixes speakers may announce" }),
  upstreamRouters: z.array(ipv4Address).min(1, { error: "needs at least one upstream router address" }),
  bfd: bfdSchema.prefault({}),
  timers: bgpTimersSchema.prefault({}),
  gracefulRestartS: z.number().int().min(0).max(4095).default(120),
  image: lbImageRef,
});

export interface RouteReflectorArgs {
  /** Namespace to run in (the LoadBalancer's; the priority class comes from it too). */
  namespace: pulumi.Input<string>;
  asn: number;
  reflectors: { node: string; address: string }[];
  speakerRanges: string[];
  /** The VIP pools' prefixes: the only routes accepted from speakers. */
  vipPrefixes: string[];
  upstreamRouters: string[];
  bfd?: Partial<z.input<typeof bfdSchema>>;
  timers?: Partial<z.input<typeof bgpTimersSchema>>;
  gracefulRestartS?: number;
  /** TCP MD5 password for every session; pass a Pulumi secret. */
  password?: pulumi.Input<string>;
  /** The LB image, which carries BIRD (required: no public image exists). */
  image?: string;
  /** See LoadBalancerArgs.skipAwait. */
  skipAwait?: boolean;
}

export class RouteReflector extends pulumi.ComponentResource {
  public readonly deployments: k8s.apps.v1.Deployment[] = [];
  public readonly configs: k8s.core.v1.Secret[] = [];
  public readonly serviceAccount: k8s.core.v1.ServiceAccount;
  /** Addresses the upstream router peers with (and the LB speakers too). */
  public readonly addresses: string[];

  constructor(name: string, args: RouteReflectorArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:core:RouteReflector", name, {}, opts);
    const a = parseOrThrow(argsSchema, args, "routeReflector");
    this.addresses = a.reflectors.map((r) => r.address);
    const labels = standardLabels("route-reflector", { app: RR_APP_LABEL });
    const child = { parent: this };
    const meta = (n: string) => ({ name: n, namespace: args.namespace, labels });

    // The reflectors never call the Kubernetes API: no token in their pods.
    this.serviceAccount = new k8s.core.v1.ServiceAccount(
      `${name}-sa`,
      { metadata: meta(RR_SERVICE_ACCOUNT), automountServiceAccountToken: false },
      child,
    );

    a.reflectors.forEach((rr, i) => {
      const objectName = `portable-lb-rr-${i}`;
      const birdConf = pulumi.all([args.password]).apply(([password]) =>
        renderRouteReflectorBird({
          routerId: rr.address,
          asn: a.asn,
          speakerRanges: a.speakerRanges,
          vipPrefixes: a.vipPrefixes,
          upstreamRouters: a.upstreamRouters,
          bfd: a.bfd,
          timers: a.timers,
          gracefulRestartS: a.gracefulRestartS,
          ...(password !== undefined && { password }),
        }),
      );
      // A Secret, not a ConfigMap: the rendered config carries the BGP password.
      const config = new k8s.core.v1.Secret(
        `${name}-config-${i}`,
        {
          metadata: meta(objectName),
          type: "Opaque",
          stringData: { [RR_PATHS.configFile]: pulumi.secret(birdConf) },
        },
        child,
      );
      this.configs.push(config);
      const rrLabels = { ...labels, "portable-lb.io/reflector": String(i) };
      this.deployments.push(
        new k8s.apps.v1.Deployment(
          `${name}-${i}`,
          {
            metadata: {
              ...meta(objectName),
              ...(args.skipAwait && { annotations: { "pulumi.com/skipAwait": "true" } }),
            },
            spec: {
              replicas: 1,
              selector: { matchLabels: { app: RR_APP_LABEL, "portable-lb.io/reflector": String(i) } },
              // Two BIRDs cannot share the node's port 179: stop the old pod before starting the new.
              strategy: { type: "Recreate" },
              template: {
                metadata: {
                  labels: rrLabels,
                  annotations: { [CONFIG_HASH_ANNOTATION]: birdConf.apply((c) => configHash(c)) },
                },
                spec: routeReflectorPodSpec({
                  configSecret: objectName,
                  node: rr.node,
                  image: a.image,
                  priorityClassName: LB_PRIORITY_CLASS,
                }),
              },
            },
          },
          { ...child, dependsOn: [config] },
        ),
      );
    });

    this.registerOutputs({ addresses: this.addresses });
  }
}
