// The root program: deploys portable-lb into the environment named by the stack's config
// (`portable-lb:environment`). See README.md for the stacks and their settings.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { SystemNamespace } from "@portable-lb/core";
import { environmentFromConfig } from "@portable-lb/providers";

const environment = environmentFromConfig(new pulumi.Config());
const cluster = new k8s.Provider("cluster", { kubeconfig: environment.kubeconfig });
const system = new SystemNamespace(
  "system",
  { name: "portable-lb-system", component: "platform", podSecurity: "privileged" },
  { provider: cluster },
);

export const environmentKind = environment.kind;
export const systemNamespace = system.name;
