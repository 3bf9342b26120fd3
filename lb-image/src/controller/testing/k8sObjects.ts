// Small builders of Kubernetes objects for the controller's tests.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { ingressOf } from "../statusWriter.ts";

export const CLASS = "portable-lb.io/ecmp";

export function lbService(
  name: string,
  opts: {
    ports?: { name?: string; port: number; protocol?: string }[];
    vips?: string[];
    annotations?: Record<string, string>;
    created?: string;
    class?: string;
    ns?: string;
    uid?: string;
    selector?: Record<string, string> | undefined;
  } = {},
): V1Service {
  return {
    metadata: {
      name,
      namespace: opts.ns ?? "default",
      ...(opts.uid && { uid: opts.uid }),
      ...(opts.annotations && { annotations: opts.annotations }),
      creationTimestamp: new Date(opts.created ?? "2026-01-01T00:00:00Z"),
    },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: opts.class ?? CLASS,
      ports: opts.ports ?? [{ name: "http", port: 80, protocol: "TCP" }],
      ...(opts.selector && { selector: opts.selector }),
    },
    status: { loadBalancer: { ingress: ingressOf(opts.vips ?? []) } },
  };
}

export function slice(
  service: string,
  endpoints: { ip: string; ready?: boolean; serving?: boolean; terminating?: boolean; nodeName?: string }[],
  opts: { portName?: string; port?: number; name?: string; ns?: string } = {},
): V1EndpointSlice {
  return {
    addressType: "IPv4",
    metadata: {
      name: opts.name ?? `${service}-abc`,
      namespace: opts.ns ?? "default",
      labels: { "kubernetes.io/service-name": service },
    },
    ports: [{ name: opts.portName ?? "http", port: opts.port ?? 8080, protocol: "TCP" }],
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: {
        ready: e.ready ?? true,
        serving: e.serving ?? e.ready ?? true,
        terminating: e.terminating ?? false,
      },
      ...(e.nodeName !== undefined && { nodeName: e.nodeName }),
    })),
  };
}
