// A route reflector's pod, as a pure function: BIRD on the node's host network with the config from
// its Secret, and only the capability port 179 needs. The RouteReflector component deploys it; the
// BGP tests and benchmarks run exactly this container.
import type * as k8s from "@pulumi/kubernetes";
import { minimalSecurityContext } from "../containerSecurity.ts";

export const RR_PATHS = {
  /** Where the config Secret is mounted: its one key, configFile, is BIRD's config. */
  configDir: "/etc/bird",
  configFile: "bird.conf",
  /** BIRD's control socket folder (an emptyDir). */
  runDir: "/run/bird",
} as const;

/** The reflectors never call the Kubernetes API: their ServiceAccount mounts no token. */
export const RR_SERVICE_ACCOUNT = "portable-lb-route-reflector";

export interface RouteReflectorPodSpecInput {
  /** The Secret holding this reflector's bird.conf (also the Deployment's name). */
  configSecret: string;
  /** The node (kubernetes.io/hostname) it runs on. */
  node: string;
  image: string;
  priorityClassName: string;
}

export function routeReflectorPodSpec(input: RouteReflectorPodSpecInput): k8s.types.input.core.v1.PodSpec {
  return {
    serviceAccountName: RR_SERVICE_ACCOUNT,
    automountServiceAccountToken: false,
    // The node's fixed address is what the upstream router peers with.
    hostNetwork: true,
    dnsPolicy: "ClusterFirstWithHostNet",
    nodeSelector: { "kubernetes.io/hostname": input.node },
    tolerations: [{ operator: "Exists", effect: "NoSchedule" }],
    priorityClassName: input.priorityClassName,
    containers: [
      {
        name: "bird",
        image: input.image,
        command: [
          "bird",
          ...[
            "-f",
            "-c",
            `${RR_PATHS.configDir}/${RR_PATHS.configFile}`,
            "-s",
            `${RR_PATHS.runDir}/bird.ctl`,
          ],
        ],
        // Port 179 only; the reflector installs no kernel routes, and its BFD needs no capability
        // (lb-image/bird/socket-priority-fallback.patch).
        securityContext: minimalSecurityContext(["NET_BIND_SERVICE"]),
        livenessProbe: {
          exec: { command: ["birdc", "-s", `${RR_PATHS.runDir}/bird.ctl`, "show", "status"] },
          periodSeconds: 10,
          failureThreshold: 3,
        },
        resources: { requests: { cpu: "50m", memory: "32Mi" }, limits: { memory: "256Mi" } },
        volumeMounts: [
          { name: "config", mountPath: RR_PATHS.configDir, readOnly: true },
          { name: "run", mountPath: RR_PATHS.runDir },
        ],
      },
    ],
    volumes: [
      { name: "config", secret: { secretName: input.configSecret, defaultMode: 0o400 } },
      { name: "run", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } },
    ],
  };
}
