// The images the lab's nodes run, each imported into every node's containerd under the name pods use
// (no registry is reachable or needed): the lab's own (scripts/bootstrap/images.sh builds them;
// scripts/toolenv.sh names each one's archive and reference) and this checkout's LB image. Beside
// them, the control plane kubeadm deploys, for machines that run the onprem bootstrap script.
import { existsSync } from "node:fs";
import { builtLbImage } from "../builtLbImage.ts";

export interface LabImage {
  /** The OCI archive to import. */
  archive: string;
  /** The name it is stored under, and pods' `image`. */
  ref: string;
}

/**
 * Where the control-plane images are named: kubeadm's `imageRepository` that finds them (each is
 * `<repository>/<name>:<kubeadm's tag>`, as `kubeadm config images list` names it).
 */
export const CONTROL_PLANE_IMAGE_REPOSITORY = "localhost/portable-lb";

/** kubeadm's control plane, node proxy and cluster DNS (pause is the lab's, under kubeadm's name). */
export const CONTROL_PLANE_IMAGE_NAMES = [
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kube-proxy",
  "etcd",
  "coredns",
] as const;

export type ControlPlaneImageName = (typeof CONTROL_PLANE_IMAGE_NAMES)[number];

/** pause: the pod sandbox; flannel: its DaemonSet; busybox: the node tests; demo-web: the demo web app. */
export type LabImageName = "pause" | "flannel" | "busybox" | "demo-web" | ControlPlaneImageName;

export function labImage(name: LabImageName, env: NodeJS.ProcessEnv = process.env): LabImage {
  const key = `PORTABLE_LB_${name.toUpperCase().replaceAll("-", "_")}_IMAGE`;
  const archive = env[`${key}_ARCHIVE`];
  const ref = env[`${key}_REF`];
  if (!archive || !ref || !existsSync(archive))
    throw new Error(
      `the lab's ${name} image is missing (${key}_ARCHIVE=${archive ?? "unset"}): run scripts/bootstrap.sh, and run with scripts/toolenv.sh sourced`,
    );
  return { archive, ref };
}

/** Every image a lab node imports (coredns: the cluster's DNS). */
export function labNodeImages(): LabImage[] {
  return [
    labImage("pause"),
    labImage("flannel"),
    labImage("busybox"),
    labImage("demo-web"),
    labImage("coredns"),
    builtLbImage(),
  ];
}

/** The control-plane images, to import into a machine's containerd before `kubeadm init`/`join`. */
export function controlPlaneImages(env: NodeJS.ProcessEnv = process.env): LabImage[] {
  return CONTROL_PLANE_IMAGE_NAMES.map((name) => labImage(name, env));
}
