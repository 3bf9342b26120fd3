import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { standardLabels } from "./labels.ts";

/** Pod Security Admission levels (https://kubernetes.io/docs/concepts/security/pod-security-standards/). */
export type PodSecurityLevel = "privileged" | "baseline" | "restricted";

export interface SystemNamespaceArgs {
  /** The namespace's name; fixed (not auto-named) because other stacks and operators refer to it. */
  name: string;
  /** Which component of portable-lb lives here (the app.kubernetes.io/component label). */
  component: string;
  /**
   * The strictest Pod Security level the namespace's pods pass. Data-plane pods that need NET_ADMIN
   * pass only "privileged", which is why each component gets its own namespace: the rest stay strict.
   */
  podSecurity: PodSecurityLevel;
}

/** A namespace for one portable-lb component, labelled and with Pod Security Admission enforced. */
export class SystemNamespace extends pulumi.ComponentResource {
  public readonly name: pulumi.Output<string>;
  public readonly namespace: k8s.core.v1.Namespace;

  constructor(name: string, args: SystemNamespaceArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:core:SystemNamespace", name, {}, opts);
    this.namespace = new k8s.core.v1.Namespace(
      name,
      {
        metadata: {
          name: args.name,
          labels: standardLabels(args.component, {
            "pod-security.kubernetes.io/enforce": args.podSecurity,
            "pod-security.kubernetes.io/warn": args.podSecurity,
          }),
        },
      },
      { parent: this },
    );
    this.name = this.namespace.metadata.name;
    this.registerOutputs({ name: this.name });
  }
}
