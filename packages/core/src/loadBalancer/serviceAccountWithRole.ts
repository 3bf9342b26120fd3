// A ServiceAccount with a namespaced Role bound to it: how each portable-lb workload gets exactly
// the rights it needs in its own namespace; and a ClusterRole bound to it for what it reads
// cluster-wide.
import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";

type PolicyRule = k8s.types.input.rbac.v1.PolicyRule;

export interface ServiceAccountWithRole {
  serviceAccount: k8s.core.v1.ServiceAccount;
  role: k8s.rbac.v1.Role;
}

/** `resourceName` prefixes the Pulumi names; `name` is the Kubernetes name of all three objects. */
export function serviceAccountWithRole(
  resourceName: string,
  name: string,
  meta: { namespace: pulumi.Input<string>; labels: Record<string, string> },
  rules: PolicyRule[],
  opts: pulumi.CustomResourceOptions,
): ServiceAccountWithRole {
  const serviceAccount = new k8s.core.v1.ServiceAccount(
    `${resourceName}-sa`,
    { metadata: { name, ...meta } },
    opts,
  );
  const role = new k8s.rbac.v1.Role(`${resourceName}-role`, { metadata: { name, ...meta }, rules }, opts);
  new k8s.rbac.v1.RoleBinding(
    `${resourceName}-rolebinding`,
    {
      metadata: { name, ...meta },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role.metadata.name },
      subjects: [{ kind: "ServiceAccount", name: serviceAccount.metadata.name, namespace: meta.namespace }],
    },
    opts,
  );
  return { serviceAccount, role };
}

/** A ClusterRole named `name` with `rules`, bound to the ServiceAccount. */
export function clusterRoleFor(
  resourceName: string,
  name: string,
  labels: Record<string, string>,
  rules: PolicyRule[],
  serviceAccount: { name: pulumi.Input<string>; namespace: pulumi.Input<string> },
  opts: pulumi.CustomResourceOptions,
): k8s.rbac.v1.ClusterRole {
  const clusterRole = new k8s.rbac.v1.ClusterRole(
    `${resourceName}-clusterrole`,
    { metadata: { name, labels }, rules },
    opts,
  );
  new k8s.rbac.v1.ClusterRoleBinding(
    `${resourceName}-clusterrolebinding`,
    {
      metadata: { name, labels },
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: clusterRole.metadata.name,
      },
      subjects: [{ kind: "ServiceAccount", ...serviceAccount }],
    },
    opts,
  );
  return clusterRole;
}
