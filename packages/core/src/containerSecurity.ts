// The one container security context portable-lb uses: never privileged, read-only root, every
// capability dropped except the ones named.
import type * as k8s from "@pulumi/kubernetes";

// Root inside the container is needed for added capabilities to be effective (Kubernetes grants
// no ambient capabilities to non-root users); everything else is taken away.
export function minimalSecurityContext(capabilities: string[]): k8s.types.input.core.v1.SecurityContext {
  return {
    privileged: false,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsUser: 0,
    capabilities: { drop: ["ALL"], add: capabilities },
    seccompProfile: { type: "RuntimeDefault" },
  };
}

/** A pod of Pod Security's restricted level: run as `uid` (never root), with the runtime's seccomp profile. */
export function restrictedPodSecurityContext(uid: number) {
  return { runAsNonRoot: true, runAsUser: uid, seccompProfile: { type: "RuntimeDefault" } };
}
