// The LB pod, as a pure function of the LB config: which containers run (controller, plus the BGP
// speaker in bgp mode), with only the capabilities the data plane needs and a termination path that
// withdraws VIPs before the pod goes away.
import type * as k8s from "@pulumi/kubernetes";
import { usesFastPath, type LbConfig } from "../config/lbConfig.ts";
import { minimalSecurityContext } from "../containerSecurity.ts";
import {
  BIRD_RUN_FILES,
  CONTROLLER_MEMORY,
  LB_APP_LABEL,
  LB_COMMANDS,
  LB_HTTP_PATHS,
  LB_PATHS,
  LB_STOP_TIMEOUTS,
} from "../config/lbImage.ts";

type PodSpec = k8s.types.input.core.v1.PodSpec;
type Container = k8s.types.input.core.v1.Container;

export { LB_APP_LABEL };
export const DEFAULT_LB_NODE_SELECTOR = { "portable-lb.io/load-balancer": "true" };
/** LB nodes may be tainted to keep apps off them; the LB pods and node agents go there anyway. */
export const LB_NODE_TOLERATIONS = [
  { key: Object.keys(DEFAULT_LB_NODE_SELECTOR)[0]!, operator: "Exists", effect: "NoSchedule" },
];
/** The pod's grace period: preStop (the withdrawal), then the drain, then a margin to exit. */
export const lbTerminationGraceS = (config: LbConfig) =>
  LB_STOP_TIMEOUTS.preStopS + config.drain.timeoutS + 5;

export interface LbPodSpecInput {
  config: LbConfig;
  image: string;
  serviceAccountName: string;
  priorityClassName: string;
  nodeSelector: Record<string, string>;
  /** A Secret named so holds the BGP password under key "password". */
  bgpPasswordSecret?: string;
  configMapName: string;
}

export const downwardEnv = [
  { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
  { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
  { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
  // Events on the LB pod need its uid to show in `kubectl describe pod`.
  { name: "POD_UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
  { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
  // The BGP next hop: routers reach the node, the node forwards to this pod.
  { name: "HOST_IP", valueFrom: { fieldRef: { fieldPath: "status.hostIP" } } },
];

function controller(input: LbPodSpecInput, bgp: boolean): Container {
  const { ports } = input.config;
  return {
    name: "controller",
    image: input.image,
    command: [LB_COMMANDS.controller, "--config", LB_PATHS.configFile],
    env: [...downwardEnv, { name: "NODE_OPTIONS", value: CONTROLLER_MEMORY.nodeOptions }],
    ports: [
      { name: "metrics", containerPort: ports.metrics, protocol: "TCP" },
      { name: "health", containerPort: ports.health, protocol: "TCP" },
    ],
    // NET_ADMIN programs IPVS/nftables and routes in the pod's own network namespace; BPF loads the
    // DSR fast path's program there (its loader attaches it to the pod's own device); nothing more.
    securityContext: minimalSecurityContext(
      usesFastPath(input.config.dataPlane) ? ["NET_ADMIN", "BPF"] : ["NET_ADMIN"],
    ),
    livenessProbe: {
      httpGet: { path: LB_HTTP_PATHS.healthz, port: "health" },
      periodSeconds: 10,
      failureThreshold: 3,
    },
    // Ready gates the node's route to this pod (the node agent routes the VIP pools to a Ready LB
    // pod), which gates the first announcement: the probe's period is part of every LB pod's join.
    readinessProbe: {
      httpGet: { path: LB_HTTP_PATHS.readyz, port: "health" },
      periodSeconds: 1,
      failureThreshold: 2,
    },
    // Withdraw first; SIGTERM comes after, and the controller then drains before it exits.
    lifecycle: { preStop: { httpGet: { path: LB_HTTP_PATHS.prestop, port: "health" } } },
    resources: {
      requests: { cpu: "100m", memory: `${CONTROLLER_MEMORY.requestMi}Mi` },
      limits: { memory: `${CONTROLLER_MEMORY.limitMi}Mi` },
    },
    volumeMounts: [
      // The config, and the BGP password beside it when there is one (see configVolume).
      { name: "config", mountPath: LB_PATHS.configDir, readOnly: true },
      { name: "tmp", mountPath: "/tmp" },
      // The controller writes BIRD's config and drives it through its control socket.
      ...(bgp ? [{ name: "bird-run", mountPath: LB_PATHS.birdRunDir }] : []),
    ],
  };
}

function speaker(input: LbPodSpecInput): Container {
  return {
    name: "bgp-speaker",
    image: input.image,
    command: [LB_COMMANDS.speaker],
    env: downwardEnv,
    // BIRD listens on port 179; it touches no kernel routes, so it needs nothing else.
    securityContext: minimalSecurityContext(["NET_BIND_SERVICE"]),
    // This container has no LB config: the controller's health port comes as an argument.
    lifecycle: {
      preStop: {
        exec: { command: [LB_COMMANDS.withdraw, "--port", String(input.config.ports.health)] },
      },
    },
    livenessProbe: {
      exec: {
        command: ["birdc", "-s", `${LB_PATHS.birdRunDir}/${BIRD_RUN_FILES.socket}`, "show", "status"],
      },
      periodSeconds: 10,
      failureThreshold: 3,
    },
    resources: { requests: { cpu: "50m", memory: "32Mi" }, limits: { memory: "128Mi" } },
    // BIRD reads the password from the config the controller renders, not from the Secret.
    volumeMounts: [{ name: "bird-run", mountPath: LB_PATHS.birdRunDir }],
  };
}

/**
 * The config ConfigMap, with the BGP password Secret projected beside it (bgp/password) when there
 * is one: the controller reads both. One volume, because a second one mounted inside the read-only
 * config mount would need a mountpoint the runtime cannot create there.
 */
function configVolume(input: LbPodSpecInput, bgp: boolean) {
  if (!bgp || input.bgpPasswordSecret === undefined) {
    return { name: "config", configMap: { name: input.configMapName } };
  }
  const passwordPath = LB_PATHS.bgpPasswordFile.slice(`${LB_PATHS.configDir}/`.length);
  return {
    name: "config",
    projected: {
      sources: [
        { configMap: { name: input.configMapName } },
        {
          secret: {
            name: input.bgpPasswordSecret,
            items: [{ key: "password", path: passwordPath, mode: 0o400 }],
          },
        },
      ],
    },
  };
}

/**
 * The sysctls an LB pod may set in its own network namespace; none is on Kubernetes' "safe" list,
 * so the LB nodes' kubelets must allow them all (`allowedUnsafeSysctls`, or
 * `--allowed-unsafe-sysctls`), or the pods fail with SysctlForbidden.
 */
export const LB_POD_SYSCTLS = [
  "net.ipv4.ip_forward",
  "net.ipv4.vs.conntrack",
  "net.ipv4.vs.expire_nodest_conn",
];

/**
 * What the pod sets: ip_forward (it forwards VIP traffic to backends) and, with dataPlane.engine
 * ipvs, net.ipv4.vs.conntrack (IPVS hands its NAT connections to conntrack, so the controller's
 * nft table can masquerade them) and net.ipv4.vs.expire_nodest_conn (IPVS lets go of the
 * connections of a backend that left, so a UDP client sending from a fixed port moves on, as
 * kube-proxy's IPVS mode sets it). Those exist only where ip_vs is loaded, and a sysctl the kernel
 * lacks stops the pod from starting: in auto mode they are not set, and the controller uses IPVS
 * only if it finds conntrack on (lb-image chooseEngine.ts).
 */
export function lbPodSysctls(config: LbConfig): string[] {
  return LB_POD_SYSCTLS.filter(
    (name) => !name.startsWith("net.ipv4.vs.") || config.dataPlane.engine === "ipvs",
  );
}

export function lbPodSpec(input: LbPodSpecInput): PodSpec {
  const bgp = input.config.routingMode === "bgp";
  return {
    serviceAccountName: input.serviceAccountName,
    priorityClassName: input.priorityClassName,
    nodeSelector: input.nodeSelector,
    // One LB pod per LB node: ECMP spreads over nodes, so two pods on one node add nothing.
    affinity: {
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: { app: LB_APP_LABEL } }, topologyKey: "kubernetes.io/hostname" },
        ],
      },
    },
    tolerations: LB_NODE_TOLERATIONS,
    terminationGracePeriodSeconds: lbTerminationGraceS(input.config),
    securityContext: { sysctls: lbPodSysctls(input.config).map((name) => ({ name, value: "1" })) },
    containers: bgp ? [controller(input, bgp), speaker(input)] : [controller(input, bgp)],
    volumes: [
      configVolume(input, bgp),
      { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "64Mi" } },
      ...(bgp ? [{ name: "bird-run", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } }] : []),
    ],
  };
}
