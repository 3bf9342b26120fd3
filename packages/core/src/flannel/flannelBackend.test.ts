import type { Platform } from "../platform.ts";
import { ConfigError } from "../validation.ts";
import type { FlannelBackend, VxlanOptions } from "./flannelBackend.ts";
import { netConf, resolveFlannelBackend } from "./flannelBackend.ts";

const HOST_GW_ON_CLOUD = (platform: Platform) =>
  `flannel.backend: host-gw does not work on ${platform}: a cloud gateway sits between the VMs and drops ` +
  "un-encapsulated pod traffic addressed to the overlay network, which it does not know " +
  '(thesis Table 3.1); use "vxlan" (got "host-gw")';
const UDP = (fix: string) =>
  "flannel.backend: udp is too slow: flanneld encapsulates every packet in user space, far below host-gw " +
  `and vxlan (thesis Fig. 6.3); use "${fix}" (got "udp")`;
const UNKNOWN = (value: string) =>
  `flannel.backend: unknown backend; use one of: host-gw, vxlan, wireguard (got ${JSON.stringify(value)})`;

describe("resolveFlannelBackend", () => {
  it.each<[Platform, string | undefined, string]>([
    ["onprem", undefined, "host-gw"],
    ["lab", undefined, "host-gw"],
    ["aws", undefined, "vxlan"],
    ["gcp", undefined, "vxlan"],
    ["onprem", "host-gw", "host-gw"],
    ["lab", "vxlan", "vxlan"],
    ["onprem", "wireguard", "wireguard"],
    ["aws", "vxlan", "vxlan"],
    ["gcp", "wireguard", "wireguard"],
  ])("on %s, %s gives %s", (platform, requested, expected) => {
    expect(resolveFlannelBackend(platform, requested)).toBe(expected);
  });

  it.each<[Platform, string, string]>([
    ["aws", "host-gw", HOST_GW_ON_CLOUD("aws")],
    ["gcp", "host-gw", HOST_GW_ON_CLOUD("gcp")],
    ["onprem", "udp", UDP("host-gw")],
    ["lab", "udp", UDP("host-gw")],
    ["aws", "udp", UDP("vxlan")],
    ["gcp", "udp", UDP("vxlan")],
    ["onprem", "ipip", UNKNOWN("ipip")],
    ["aws", "VXLAN", UNKNOWN("VXLAN")],
    ["lab", "", UNKNOWN("")],
  ])("on %s, refuses %j", (platform, requested, message) => {
    expect(() => resolveFlannelBackend(platform, requested)).toThrow(new ConfigError(message));
    expect(() => resolveFlannelBackend(platform, requested)).toThrow(ConfigError);
  });
});

describe("netConf", () => {
  it("puts the pod CIDR and backend into net-conf.json, IPv4 on", () => {
    expect(netConf("10.244.0.0/16", "host-gw")).toEqual({
      Network: "10.244.0.0/16",
      EnableIPv4: true,
      Backend: { Type: "host-gw" },
    });
  });

  it.each<[VxlanOptions, object]>([
    [{}, { Type: "vxlan" }],
    [{ vni: 4096 }, { Type: "vxlan", VNI: 4096 }],
    [{ port: 4789 }, { Type: "vxlan", Port: 4789 }],
    [
      { vni: 1, port: 8472 },
      { Type: "vxlan", VNI: 1, Port: 8472 },
    ],
    [
      { vni: 16777215, port: 65535 },
      { Type: "vxlan", VNI: 16777215, Port: 65535 },
    ],
  ])("vxlan with %j has Backend %j", (vxlan, backend) => {
    expect(netConf("10.244.0.0/16", "vxlan", vxlan).Backend).toEqual(backend);
  });

  it.each<[FlannelBackend, VxlanOptions, string]>([
    [
      "host-gw",
      { vni: 2 },
      'flannel.vxlan: VNI and port apply only to the vxlan backend, not host-gw; remove them or set flannel.backend to "vxlan" (got {"vni":2})',
    ],
    [
      "wireguard",
      { port: 4789 },
      'flannel.vxlan: VNI and port apply only to the vxlan backend, not wireguard; remove them or set flannel.backend to "vxlan" (got {"port":4789})',
    ],
    ["vxlan", { vni: 0 }, "flannel.vxlan.vni: must be an integer from 1 to 16777215 (got 0)"],
    ["vxlan", { vni: 16777216 }, "flannel.vxlan.vni: must be an integer from 1 to 16777215 (got 16777216)"],
    ["vxlan", { vni: 1.5 }, "flannel.vxlan.vni: must be an integer from 1 to 16777215 (got 1.5)"],
    ["vxlan", { port: 0 }, "flannel.vxlan.port: must be an integer from 1 to 65535 (got 0)"],
    ["vxlan", { port: 65536 }, "flannel.vxlan.port: must be an integer from 1 to 65535 (got 65536)"],
  ])("%s refuses %j", (backend, vxlan, message) => {
    expect(() => netConf("10.244.0.0/16", backend, vxlan)).toThrow(new ConfigError(message));
  });
});
