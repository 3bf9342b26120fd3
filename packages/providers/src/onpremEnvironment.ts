// `environment` of kind "onprem": machines that exist already, reached over SSH, each with its role
// and its address on the node network. The plan is the list itself, checked at preview.
import { ConfigError, cidrContains, imageRepositorySchema, ipv4Address, problem } from "@portable-lb/core";
import { z } from "zod";
import { bgpPeersSchema, clusterNameSchema, lbTaintSchema } from "./environmentFields.ts";
import { NODE_ROLES, type EnvironmentPlan } from "./provider.ts";

/** A Go duration as Kubernetes configurations take it: 0s, 24h0m0s, 90s. */
const duration = z
  .string()
  .regex(/^(0|([0-9]+(h|m|s))+)$/, { error: "must be a duration like 0s, 90s or 24h0m0s" });

export const onpremEnvironmentSchema = z
  .strictObject({
    kind: z.literal("onprem"),
    name: clusterNameSchema,
    nodes: z
      .array(
        z.strictObject({
          /** The Kubernetes node name. */
          name: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, {
            error: "must be a DNS label like lb-1 (a-z, 0-9 and '-')",
          }),
          /** Where SSH reaches it: a host name or address. */
          host: z.string().min(1),
          /** Its address on the node network (network.nodeCidr): the kubelet's node IP. */
          address: ipv4Address,
          role: z.enum(NODE_ROLES),
          /** The machine's SSH host key ("ssh-ed25519 AAAA..."), checked on every connection when given. */
          hostKey: z
            .string()
            .regex(/^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+=*$/, {
              error:
                "must be one public key line as ssh-keyscan prints it, without the host: e.g. ssh-ed25519 AAAA...",
            })
            .optional(),
        }),
      )
      .min(2, { error: "needs the control plane and at least one LB node" }),
    ssh: z
      .strictObject({
        user: z.string().min(1).default("root"),
        port: z.number().int().min(1).max(65535).default(22),
      })
      .prefault({}),
    bgp: bgpPeersSchema.optional(),
    lbTaint: lbTaintSchema,
    /** What these machines need that machines we make would not (bootstrapScript.ts MachineSettings). */
    machines: z
      .strictObject({
        /** A registry mirror holding kubeadm's images under their usual names, for air-gapped sites. */
        imageRepository: imageRepositorySchema.optional(),
        /** The machines boot with cgroup v1 (kubelet 1.35 runs on it only when told). */
        cgroupV1: z.boolean().default(false),
        /** An absolute folder on every machine holding kubeadm patches (kubeadm's --patches). */
        kubeadmPatches: z
          .string()
          .regex(/^(\/[A-Za-z0-9._-]+)+$/, {
            error: "must be an absolute path, e.g. /etc/kubernetes/patches",
          })
          .optional(),
        /** What kube-proxy leaves alone here (machines in containers, or tuned by the site). */
        kubeProxy: z
          .strictObject({
            conntrack: z
              .strictObject({
                maxPerCore: z.number().int().min(0).optional(),
                min: z.number().int().min(0).optional(),
                tcpEstablishedTimeout: duration.optional(),
                tcpCloseWaitTimeout: duration.optional(),
              })
              .optional(),
            oomScoreAdj: z.number().int().min(-1000).max(1000).optional(),
          })
          .optional(),
      })
      .prefault({}),
  })
  .superRefine((env, ctx) => {
    const controlPlanes = env.nodes.filter((n) => n.role === "control-plane").length;
    if (controlPlanes !== 1)
      ctx.addIssue({
        code: "custom",
        path: ["nodes"],
        message: `needs exactly one node with role control-plane, and has ${controlPlanes}; give one node that role`,
      });
    if (!env.nodes.some((n) => n.role === "lb"))
      ctx.addIssue({ code: "custom", path: ["nodes"], message: "needs at least one node with role lb" });
    env.nodes.forEach((node, i) => {
      for (const key of ["name", "host", "address"] as const) {
        if (env.nodes.findIndex((n) => n[key] === node[key]) < i)
          ctx.addIssue({
            code: "custom",
            path: ["nodes", i, key],
            message: `is also node ${env.nodes.findIndex((n) => n[key] === node[key])}'s; give each node its own`,
          });
      }
    });
  });

export type OnpremEnvironmentConfig = z.output<typeof onpremEnvironmentSchema>;

/** The machines as given; each address must lie on the node network. */
export function onpremPlan(env: OnpremEnvironmentConfig, nodeCidr: string): EnvironmentPlan {
  const outside = env.nodes.flatMap((node, i) =>
    cidrContains(nodeCidr, node.address)
      ? []
      : [
          problem(
            `environment.nodes[${i}].address`,
            `is outside network.nodeCidr ${nodeCidr}; use the node's address on the node network`,
            node.address,
          ),
        ],
  );
  if (outside.length) throw new ConfigError(outside);
  return {
    platform: "onprem",
    nodes: env.nodes.map(({ name, role, address }) => ({ name, role, address })),
    ...(env.bgp && { bgp: env.bgp }),
  };
}
