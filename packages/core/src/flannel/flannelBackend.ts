// Which flannel backend a platform can use, and the net-conf.json flanneld reads. The thesis
// (Table 3.1, Fig. 6.3) decides both what works where and what is worth offering at all.
import type { Platform } from "../platform.ts";
import { hasCloudGateway } from "../platform.ts";
import { ConfigError } from "../validation.ts";

export const FLANNEL_BACKENDS = ["host-gw", "vxlan", "wireguard"] as const;
export type FlannelBackend = (typeof FLANNEL_BACKENDS)[number];

/** VXLAN tuning; flannel's defaults (VNI 1, the kernel's UDP port 8472) apply when unset. */
export interface VxlanOptions {
  /** VXLAN network identifier, 1..16777215 (24 bits). */
  vni?: number;
  /** UDP port of the VXLAN tunnel, 1..65535. */
  port?: number;
}

/** The `net-conf.json` object flanneld reads from the kube-flannel-cfg ConfigMap. */
export interface FlannelNetConf {
  Network: string;
  EnableIPv4: true;
  Backend: { Type: FlannelBackend; VNI?: number; Port?: number };
}

function configError(field: string, message: string, value: unknown): ConfigError {
  return new ConfigError(`${field}: ${message} (got ${JSON.stringify(value)})`);
}

/** host-gw where nodes share a network we control (no encapsulation, fastest); vxlan behind a cloud gateway. */
export function defaultFlannelBackend(platform: Platform): FlannelBackend {
  return hasCloudGateway(platform) ? "vxlan" : "host-gw";
}

/** The backend to run on `platform`: `requested` if it works there, else a ConfigError saying why and what to use. */
export function resolveFlannelBackend(platform: Platform, requested?: string): FlannelBackend {
  if (requested === undefined) return defaultFlannelBackend(platform);
  const field = "flannel.backend";
  if (requested === "udp") {
    throw configError(
      field,
      "udp is too slow: flanneld encapsulates every packet in user space, far below host-gw and vxlan " +
        `(thesis Fig. 6.3); use "${defaultFlannelBackend(platform)}"`,
      requested,
    );
  }
  if (!(FLANNEL_BACKENDS as readonly string[]).includes(requested)) {
    throw configError(field, `unknown backend; use one of: ${FLANNEL_BACKENDS.join(", ")}`, requested);
  }
  if (requested === "host-gw" && hasCloudGateway(platform)) {
    throw configError(
      field,
      `host-gw does not work on ${platform}: a cloud gateway sits between the VMs and drops ` +
        "un-encapsulated pod traffic addressed to the overlay network, which it does not know " +
        '(thesis Table 3.1); use "vxlan"',
      requested,
    );
  }
  return requested as FlannelBackend;
}

function checkRange(field: string, value: number | undefined, max: number): void {
  if (value !== undefined && !(Number.isInteger(value) && value >= 1 && value <= max)) {
    throw configError(field, `must be an integer from 1 to ${max}`, value);
  }
}

/** The `Backend` block of net-conf.json; VXLAN options are refused on other backends rather than ignored. */
export function flannelBackendConf(
  backend: FlannelBackend,
  vxlan: VxlanOptions = {},
): FlannelNetConf["Backend"] {
  const { vni, port } = vxlan;
  if (backend !== "vxlan" && (vni !== undefined || port !== undefined)) {
    throw configError(
      "flannel.vxlan",
      `VNI and port apply only to the vxlan backend, not ${backend}; remove them or set flannel.backend to "vxlan"`,
      vxlan,
    );
  }
  checkRange("flannel.vxlan.vni", vni, 0xffffff);
  checkRange("flannel.vxlan.port", port, 65535);
  return {
    Type: backend,
    ...(vni !== undefined && { VNI: vni }),
    ...(port !== undefined && { Port: port }),
  };
}

/** The whole `net-conf.json`: the cluster's pod CIDR, split by flanneld into one subnet per node. */
export function netConf(podCidr: string, backend: FlannelBackend, vxlan: VxlanOptions = {}): FlannelNetConf {
  return { Network: podCidr, EnableIPv4: true, Backend: flannelBackendConf(backend, vxlan) };
}
