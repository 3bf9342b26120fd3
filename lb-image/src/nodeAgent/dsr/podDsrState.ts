// A backend pod's DSR state in its own network namespace, read back and diffed, as pure functions:
//   - the decapsulating VXLAN device of the tunnel contract (dsrTunnel.ts), its MTU the pod's own
//     MTU minus the tunnel's overhead (a decapsulated frame must fit the pod's path back out);
//   - each VIP as a /32 on `lo`, labelled ours (LO_LABEL): a restart adopts exactly these and never
//     touches the pod's own addresses. (Address protocols would do too, but iproute2 6.1, the image's,
//     cannot set them; a label works on every kernel and iproute2.)
//   - where LBs may run the IPVS engine (tunnel mode, IPIP) and the kernel has ipip, an IPIP device
//     in metadata ("external") mode beside it, up, with rp_filter 0: the same decapsulation for the
//     other tunnel (a cluster may have LBs of both kinds);
//   - rp_filter 0 for `all` and the device: the client's packets arrive on the device while the
//     route back to the client is via eth0, and the effective value is max(all, device). The value
//     `all` had before is kept in the device's alias, so removing DSR from the pod restores it.
import { z } from "zod";
import {
  DSR_BACKEND_IPIP_DEVICE,
  DSR_BACKEND_MAC,
  DSR_BACKEND_DEVICE,
  DSR_OVERHEAD,
  DSR_UDP_PORT,
} from "../../dataplane/dsr/dsrTunnel.ts";
import { compareKeys } from "../../dataplane/model.ts";

/** The label of our VIP addresses on the pod's `lo` (a label must start with the device's name). */
export const LO_LABEL = "lo:plb-dsr";
const ALIAS_PREFIX = "portable-lb dsr; rp_filter.all was ";

export interface PodDsrState {
  /** MTU of the interface holding the pod's own address; undefined: the address is not here. */
  podMtu: number | undefined;
  device?: {
    /** VXLAN in external (metadata) mode on the contract's port: anything else is recreated. */
    contract: boolean;
    mtu: number;
    mac: string;
    up: boolean;
    /** The rp_filter value `all` had before this device existed, when recorded. */
    rpFilterAllBefore: number | undefined;
  };
  /** The IPIP decapsulating device, when there. */
  ipip?: {
    /** IPIP in external (metadata) mode: anything else is recreated. */
    contract: boolean;
    up: boolean;
    rpFilter: number | undefined;
  };
  /** Our VIPs on `lo` (labelled LO_LABEL), sorted. */
  vips: string[];
  /** Other IPv4 addresses on `lo` (the pod's own): never added twice, never removed. */
  otherLo: string[];
  /** rp_filter of `all` and of the device (0 off, 1 strict, 2 loose). */
  rpFilter: { all: number; device: number | undefined };
}

const linkSchema = z
  .object({
    ifname: z.string(),
    mtu: z.number(),
    address: z.string().optional(),
    flags: z.array(z.string()).default([]),
    ifalias: z.string().optional(),
    // A veth's other end (its ifindex in the namespace link_netnsid names).
    link_index: z.number().nullish(),
    linkinfo: z
      .object({
        info_kind: z.string().optional(),
        info_data: z
          .object({ external: z.boolean().optional(), port: z.number().optional() })
          .loose()
          .optional(),
      })
      .loose()
      .optional(),
    addr_info: z
      .array(
        z
          .object({
            family: z.string(),
            local: z.string(),
            prefixlen: z.number(),
            label: z.string().optional(),
          })
          .loose(),
      )
      .default([]),
  })
  .loose();
const linksSchema = z.array(linkSchema);

const netconfSchema = z.array(z.object({ interface: z.string(), rp_filter: z.string().optional() }).loose());
const RP_FILTER: Record<string, number> = { off: 0, strict: 1, loose: 2 };

export interface PodAddress {
  ip: string;
  /** The ifindex of the other end of the interface holding it (a pod's veth: its node side). */
  peerIfindex?: number;
}

/** The IPv4 addresses of a namespace's non-loopback interfaces (`ip -j addr show`): a pod's own. */
export function podAddresses(addrJson: string): PodAddress[] {
  return linksSchema
    .parse(JSON.parse(addrJson || "[]"))
    .filter((l) => l.ifname !== "lo")
    .flatMap((l) =>
      l.addr_info
        .filter((a) => a.family === "inet")
        .map((a) => ({
          ip: a.local,
          ...(typeof l.link_index === "number" && { peerIfindex: l.link_index }),
        })),
    );
}

/** From `ip -j -d addr show` and `ip -4 -j netconf show` inside the pod's namespace. */
export function parsePodState(addrJson: string, netconfJson: string, podIp: string): PodDsrState {
  const links = linksSchema.parse(JSON.parse(addrJson || "[]"));
  const lo = links.find((l) => l.ifname === "lo");
  const loV4 = (lo?.addr_info ?? []).filter((a) => a.family === "inet");
  const ours = loV4.filter((a) => a.label === LO_LABEL && a.prefixlen === 32).map((a) => a.local);
  const dev = links.find((l) => l.ifname === DSR_BACKEND_DEVICE);
  const before = dev?.ifalias?.startsWith(ALIAS_PREFIX)
    ? Number(dev.ifalias.slice(ALIAS_PREFIX.length))
    : NaN;
  const conf = netconfSchema.parse(JSON.parse(netconfJson || "[]"));
  const rp = (name: string) => {
    const v = conf.find((c) => c.interface === name)?.rp_filter;
    return v === undefined ? undefined : RP_FILTER[v];
  };
  const ipip = links.find((l) => l.ifname === DSR_BACKEND_IPIP_DEVICE);
  return {
    podMtu: links.find((l) => l.ifname !== "lo" && l.addr_info.some((a) => a.local === podIp))?.mtu,
    ...(dev && {
      device: {
        contract:
          dev.linkinfo?.info_kind === "vxlan" &&
          dev.linkinfo.info_data?.external === true &&
          dev.linkinfo.info_data.port === DSR_UDP_PORT,
        mtu: dev.mtu,
        mac: (dev.address ?? "").toLowerCase(),
        up: dev.flags.includes("UP"),
        rpFilterAllBefore: Number.isInteger(before) ? before : undefined,
      },
    }),
    ...(ipip && {
      ipip: {
        contract: ipip.linkinfo?.info_kind === "ipip" && ipip.linkinfo.info_data?.external === true,
        up: ipip.flags.includes("UP"),
        rpFilter: rp(DSR_BACKEND_IPIP_DEVICE),
      },
    }),
    vips: ours.sort(compareKeys),
    otherLo: loV4.filter((a) => !ours.includes(a.local)).map((a) => a.local),
    rpFilter: { all: rp("all") ?? 0, device: dev ? rp(DSR_BACKEND_DEVICE) : undefined },
  };
}

/** One change in the pod's namespace: an `ip` command, or a sysctl under net.ipv4.conf. */
export type PodStep = { ip: string[] } | { rpFilter: string; value: number };

/**
 * The steps that make the pod's state serve exactly `vips` (none: remove everything of ours), with
 * the IPIP device when `ipip` (LBs may tunnel in IPIP, and the kernel has it), else without.
 */
export function podSteps(s: PodDsrState, vips: string[], ipip = false): PodStep[] {
  const steps: PodStep[] = [];
  const want = new Set(vips);
  const addresses = (op: "add" | "del", list: string[]) =>
    list.map((v) => ({
      ip: ["addr", op, `${v}/32`, "dev", "lo", ...(op === "add" ? ["label", LO_LABEL] : [])],
    }));
  const removeVips = addresses(
    "del",
    s.vips.filter((v) => !want.has(v)),
  );
  if (vips.length === 0) {
    steps.push(...removeVips);
    if (s.device) {
      const before = s.device.rpFilterAllBefore;
      if (before !== undefined && before !== 0 && s.rpFilter.all === 0)
        steps.push({ rpFilter: "all", value: before });
      steps.push({ ip: ["link", "del", DSR_BACKEND_DEVICE] });
    }
    if (s.ipip) steps.push({ ip: ["link", "del", DSR_BACKEND_IPIP_DEVICE] });
    return steps;
  }
  if (s.podMtu === undefined) throw new Error("the pod's own address is not in this network namespace");
  const mtu = s.podMtu - DSR_OVERHEAD;
  let device = s.device;
  if (device && !device.contract) {
    steps.push({ ip: ["link", "del", DSR_BACKEND_DEVICE] });
    device = undefined;
  }
  if (!device)
    steps.push({
      ip: ["link", "add", DSR_BACKEND_DEVICE, "type", "vxlan", "external", "dstport", String(DSR_UDP_PORT)],
    });
  // Recorded once, before `all` is changed (a device recreated above keeps what its alias said).
  const before = device?.rpFilterAllBefore ?? s.device?.rpFilterAllBefore ?? s.rpFilter.all;
  if (
    !device ||
    device.mtu !== mtu ||
    device.mac !== DSR_BACKEND_MAC ||
    !device.up ||
    device.rpFilterAllBefore !== before
  )
    steps.push({
      ip: [
        "link",
        "set",
        DSR_BACKEND_DEVICE,
        "address",
        DSR_BACKEND_MAC,
        "mtu",
        String(mtu),
        "alias",
        `${ALIAS_PREFIX}${before}`,
        "up",
      ],
    });
  if (s.rpFilter.all !== 0) steps.push({ rpFilter: "all", value: 0 });
  if (!device || s.rpFilter.device !== 0) steps.push({ rpFilter: DSR_BACKEND_DEVICE, value: 0 });
  steps.push(...ipipSteps(s.ipip, ipip));
  const present = new Set([...s.vips, ...s.otherLo]);
  steps.push(
    ...addresses(
      "add",
      vips.filter((v) => !present.has(v)),
    ),
    ...removeVips,
  );
  return steps;
}

/** The IPIP device's steps: there (external, up, rp_filter 0) when `wanted`, else gone. */
function ipipSteps(found: PodDsrState["ipip"], wanted: boolean): PodStep[] {
  const del = { ip: ["link", "del", DSR_BACKEND_IPIP_DEVICE] };
  if (!wanted) return found ? [del] : [];
  const keep = found?.contract ? found : undefined;
  return [
    ...(found && !keep ? [del] : []),
    ...(keep ? [] : [{ ip: ["link", "add", DSR_BACKEND_IPIP_DEVICE, "type", "ipip", "external"] }]),
    ...(keep?.up ? [] : [{ ip: ["link", "set", DSR_BACKEND_IPIP_DEVICE, "up"] }]),
    ...(keep?.rpFilter === 0 ? [] : [{ rpFilter: DSR_BACKEND_IPIP_DEVICE, value: 0 }]),
  ];
}
