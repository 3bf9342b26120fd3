// A ServiceAccount with a namespaced Role bound to it: how each portable-lb workload gets exactly
// the rights it needs in its own namespace.
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
