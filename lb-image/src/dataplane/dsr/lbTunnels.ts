// The LB pod's half of the DSR tunnels (dsrTunnel.ts): the metadata VXLAN device, the permanent
// neighbour of its link-local next hop, and per backend pod an ip rule (its mark -> its table) and the
// table's one encapsulating route. Read back as a whole each time (one `ip -j -batch`), planned as
// a pure function, applied by diff in one `ip -batch`: everything ours carries protocol 212, so a
// restart adopts it and nothing else in the namespace is touched.
import { z } from "zod";
import { run } from "../exec.ts";
import {
  DSR_BACKEND_MAC,
  DSR_LB_DEVICE,
  DSR_NEXT_HOP,
  DSR_OVERHEAD,
  DSR_UDP_PORT,
  DSR_VNI,
  HANDOVER_NEXT_HOP,
  HANDOVER_NEXT_HOP_MAC,
  backendMark,
  lbDeviceMac,
} from "./dsrTunnel.ts";

/** Our `protocol` on rules and routes (unassigned in iproute2's rt_protos; the node agent has 211). */
export const DSR_PROTO = 212;
// Rule preferences. The backends' rules must come before the `local` table: the pod holds its VIPs
// as local addresses (IPVS, and the node-route check, send from them), and `local` would deliver a
// DSR packet to the pod itself. So while DSR is in use, `local` moves from 0 to LOCAL_TABLE_PREF.
// The encapsulated packet inherits the inner packet's mark, and its own route lookup must not land
// in the tunnel again: VXLAN to the tunnel's port skips the backends' rules. (Not `iif lo`, which
// every locally made lookup has, nft's `fib` too: the flow table asks fib whether a mark still has
// its backend's tunnel, see nftRuleset.ts.)
export const SKIP_RULE_PREF = 100;
export const BACKEND_RULE_PREF = 101;
export const LOCAL_TABLE_PREF = 32000;

export interface Rule {
  pref: number;
  /**
   * `ipproto 17 dport N`: the tunnel's own packets (by number: the LB image has no /etc/protocols,
   * where `ip` looks names up).
   */
  udpDport?: number;
  fwmark?: number;
  /** A table to look up, or none (goto). */
  table?: string;
  goto?: number;
}

/** What the kernel holds of ours, as read back. */
export interface TunnelState {
  device?: { vxlanExternal: boolean; port: number; mac: string; mtu: number; up: boolean };
  neighbour?: { lladdr: string; permanent: boolean };
  /** The handover next hop's neighbour entry, where there is one. */
  handoverNeighbour?: { lladdr: string; permanent: boolean };
  /** Our rules (protocol 212). */
  rules: Rule[];
  /** The kernel's own `local` rule (preference 0) is there. */
  kernelLocal: boolean;
  /** Table id -> the encapsulation's destination (the backend pod) and next hop. */
  routes: Map<number, { dst: string | undefined; via: string | undefined }>;
}

/** The selectors and action of one of our rules, as `ip rule add|del` takes them. */
function ruleSpec(r: Rule): string {
  return [
    `pref ${r.pref}`,
    r.udpDport !== undefined && `ipproto 17 dport ${r.udpDport}`,
    r.fwmark !== undefined && `fwmark ${r.fwmark}`,
    r.table !== undefined && `lookup ${r.table}`,
    r.goto !== undefined && `goto ${r.goto}`,
    `protocol ${DSR_PROTO}`,
  ]
    .filter(Boolean)
    .join(" ");
}

const SKIP_RULE: Rule = { pref: SKIP_RULE_PREF, udpDport: DSR_UDP_PORT, goto: LOCAL_TABLE_PREF };
const LOCAL_RULE: Rule = { pref: LOCAL_TABLE_PREF, table: "local" };
const backendRule = (mark: number): Rule => ({ pref: BACKEND_RULE_PREF, fwmark: mark, table: String(mark) });

/** Where the tunnels go beside the backends: another platform's LB nodes, during a handover. */
export interface TunnelPeers {
  /** LB node addresses this pod relays flows to (controller/handover.ts). */
  peers?: Iterable<string>;
  /** The pod uplink's MAC, from which the device's own is made (lbDeviceMac). */
  uplinkMac?: string;
}

/**
 * The `ip` commands (one per line of `ip -batch`) that turn `found` into the tunnels to `backends`
 * (and to `peers`, through the handover next hop).
 */
export function tunnelPlan(
  found: TunnelState,
  backends: Iterable<string>,
  uplinkMtu: number,
  { peers = [], uplinkMac }: TunnelPeers = {},
): string[] {
  const hops = new Map<number, { ip: string; via: string }>([
    ...[...backends].map((ip) => [backendMark(ip), { ip, via: DSR_NEXT_HOP }] as const),
    ...[...peers].map((ip) => [backendMark(ip), { ip, via: HANDOVER_NEXT_HOP }] as const),
  ]);
  const want = new Map([...hops].map(([mark, h]) => [mark, h.ip]));
  const cmds: string[] = [];
  const del = (r: Rule) => cmds.push(`rule del ${ruleSpec(r)}`);
  if (want.size === 0) {
    // Nothing served by DSR: nothing of ours stays (the device takes its neighbour along), and
    // `local` is back at 0 before ours goes, so that local delivery never stops.
    if (!found.kernelLocal) cmds.push("rule add pref 0 lookup local");
    for (const r of found.rules) del(r);
    for (const table of found.routes.keys()) cmds.push(`route del default table ${table} proto ${DSR_PROTO}`);
    if (found.device) cmds.push(`link del ${DSR_LB_DEVICE}`);
    return cmds;
  }
  const mtu = uplinkMtu - DSR_OVERHEAD;
  const d = found.device;
  // Made anew when missing or not the device we make (a wrong kind or port cannot be changed).
  const fresh = !d || !d.vxlanExternal || d.port !== DSR_UDP_PORT;
  if (fresh && d) cmds.push(`link del ${DSR_LB_DEVICE}`);
  if (fresh) cmds.push(`link add ${DSR_LB_DEVICE} type vxlan external dstport ${DSR_UDP_PORT}`);
  const mac = lbDeviceMac(uplinkMac);
  if (fresh || d.mac !== mac || d.mtu !== mtu || !d.up)
    cmds.push(`link set ${DSR_LB_DEVICE} address ${mac} mtu ${mtu} up`);
  const n = found.neighbour;
  if (fresh || !n || n.lladdr !== DSR_BACKEND_MAC || !n.permanent)
    cmds.push(`neigh replace ${DSR_NEXT_HOP} lladdr ${DSR_BACKEND_MAC} dev ${DSR_LB_DEVICE} nud permanent`);
  const relays = [...hops.values()].some((h) => h.via === HANDOVER_NEXT_HOP);
  const h = found.handoverNeighbour;
  if (relays && (fresh || !h || h.lladdr !== HANDOVER_NEXT_HOP_MAC || !h.permanent))
    cmds.push(
      `neigh replace ${HANDOVER_NEXT_HOP} lladdr ${HANDOVER_NEXT_HOP_MAC} dev ${DSR_LB_DEVICE} nud permanent`,
    );
  if (!relays && !fresh && h) cmds.push(`neigh del ${HANDOVER_NEXT_HOP} dev ${DSR_LB_DEVICE}`);

  // Rules compare by their spec: anything of ours not wanted (or there twice) goes.
  const wanted = new Set([SKIP_RULE, LOCAL_RULE, ...[...want.keys()].map(backendRule)].map(ruleSpec));
  const have = new Set<string>();
  for (const r of found.rules) {
    const spec = ruleSpec(r);
    if (wanted.has(spec) && !have.has(spec)) have.add(spec);
    else del(r);
  }
  const add = (r: Rule) => {
    if (!have.has(ruleSpec(r))) cmds.push(`rule add ${ruleSpec(r)}`);
  };
  // `local` at its new place before the kernel's goes, so that local delivery never stops.
  add(LOCAL_RULE);
  if (found.kernelLocal) cmds.push("rule del pref 0 lookup local");
  add(SKIP_RULE);
  for (const table of found.routes.keys())
    if (!want.has(table)) cmds.push(`route del default table ${table} proto ${DSR_PROTO}`);
  for (const [mark, { ip, via }] of hops) {
    const route = found.routes.get(mark);
    if (fresh || route?.dst !== ip || route.via !== via)
      cmds.push(
        `route replace default via ${via} dev ${DSR_LB_DEVICE} onlink encap ip id ${DSR_VNI} dst ${ip} table ${mark} proto ${DSR_PROTO}`,
      );
    add(backendRule(mark));
  }
  return cmds;
}

const linkSchema = z.array(
  z.object({
    ifname: z.string(),
    address: z.string().optional(),
    mtu: z.number(),
    flags: z.array(z.string()),
    linkinfo: z
      .object({
        info_kind: z.string(),
        info_data: z.object({ external: z.boolean().optional(), port: z.number().optional() }).optional(),
      })
      .optional(),
  }),
);
const neighSchema = z.array(
  z.object({
    dst: z.string(),
    dev: z.string().optional(),
    lladdr: z.string().optional(),
    state: z.array(z.string()),
  }),
);
const ruleSchema = z.array(
  z.object({
    priority: z.number(),
    // "udp" where /etc/protocols names it (the host); "ipproto-17" without one (iproute2 6.1 in
    // the LB image), or a plain number (other versions).
    ipproto: z.union([z.string(), z.number()]).transform(String).optional(),
    dport: z.number().optional(),
    fwmark: z.string().optional(),
    table: z.string().optional(),
    goto: z.number().optional(),
    protocol: z.string().optional(),
  }),
);
// An encap route prints "dst" twice (the prefix, then the tunnel's); JSON.parse keeps the last.
const routeSchema = z.array(
  z.object({
    dst: z.string(),
    gateway: z.string().optional(),
    table: z.string().optional(),
    encap: z.string().optional(),
  }),
);
const defaultRouteSchema = z.array(z.object({ dev: z.string().optional() }));
type Neighbour = z.infer<typeof neighSchema>[number];
const neighbourOf = (n: Neighbour | undefined) =>
  n && { lladdr: n.lladdr ?? "", permanent: n.state.includes("PERMANENT") };

const isUdp = (ipproto: string | undefined) => ipproto === "udp" || /^(ipproto-)?17$/.test(ipproto ?? "");

/**
 * Everything a plan needs, in one `ip -j -d -batch -` (one process: this runs every second on
 * the cheap check). Each command prints one JSON array on its own line, none fails on an empty
 * namespace, so the answers are read by position.
 */
export const READ_BATCH = [
  "link show",
  "neigh show",
  "rule show",
  `route show table all proto ${DSR_PROTO}`,
  "route show default",
];

/** The namespace as one READ_BATCH shows it (tests feed captured text). */
export interface TunnelListings {
  state: TunnelState;
  /** The MTU of the interface the default route leaves by (the pod's eth0); 1500 without one. */
  uplinkMtu: number;
  /** That interface's MAC, when it has one. */
  uplinkMac?: string;
}

/** Parses READ_BATCH's output into the state of ours and the uplink's MTU. */
export function parseTunnelListings(out: string): TunnelListings {
  const lines = out.split("\n").filter((l) => l.trim() !== "");
  if (lines.length !== READ_BATCH.length)
    throw new Error(
      `ip -batch printed ${lines.length} listings for ${READ_BATCH.length} commands: ${out.slice(0, 200)}`,
    );
  const [links, neighs, rules, routes, defaults] = lines.map((l) => JSON.parse(l) as unknown);
  const allLinks = linkSchema.parse(links);
  const link = allLinks.find((l) => l.ifname === DSR_LB_DEVICE);
  const onDevice = neighSchema.parse(neighs).filter((n) => n.dev === undefined || n.dev === DSR_LB_DEVICE);
  const neighbour = neighbourOf(onDevice.find((n) => n.dst === DSR_NEXT_HOP));
  const handoverNeighbour = neighbourOf(onDevice.find((n) => n.dst === HANDOVER_NEXT_HOP));
  const ours = ruleSchema.parse(rules);
  const uplink = defaultRouteSchema.parse(defaults).find((r) => r.dev && r.dev !== DSR_LB_DEVICE)?.dev;
  const state: TunnelState = {
    ...(link && {
      device: {
        vxlanExternal: link.linkinfo?.info_kind === "vxlan" && link.linkinfo.info_data?.external === true,
        port: link.linkinfo?.info_data?.port ?? 0,
        mac: link.address ?? "",
        mtu: link.mtu,
        up: link.flags.includes("UP"),
      },
    }),
    ...(neighbour && { neighbour }),
    ...(handoverNeighbour && { handoverNeighbour }),
    rules: ours
      .filter((r) => r.protocol === String(DSR_PROTO))
      .map((r) => ({
        pref: r.priority,
        ...(isUdp(r.ipproto) && r.dport !== undefined && { udpDport: r.dport }),
        ...(r.fwmark !== undefined && { fwmark: Number(r.fwmark) }),
        ...(r.table !== undefined && { table: r.table }),
        ...(r.goto !== undefined && { goto: r.goto }),
      })),
    kernelLocal: ours.some(
      (r) => r.priority === 0 && r.table === "local" && r.protocol !== String(DSR_PROTO),
    ),
    routes: new Map(
      routeSchema
        .parse(routes)
        .map((r) => [
          Number(r.table ?? "254"),
          { dst: r.encap === "ip" ? r.dst : undefined, via: r.gateway },
        ]),
    ),
  };
  const up = allLinks.find((l) => l.ifname === uplink);
  return { state, uplinkMtu: up?.mtu ?? 1500, ...(up?.address && { uplinkMac: up.address }) };
}

/** Applies tunnelPlan to the namespace `ip` works in. */
export class LbTunnels {
  private readonly ip: [string, ...string[]];

  constructor(ip: [string, ...string[]] = ["ip"]) {
    this.ip = ip;
  }

  async read(): Promise<TunnelListings> {
    return parseTunnelListings(
      await run([...this.ip, "-j", "-d", "-batch", "-"], READ_BATCH.map((c) => `${c}\n`).join("")),
    );
  }

  /** Makes the tunnels exactly those to `backends` and `peers`; returns the commands it had to run. */
  async apply(backends: Iterable<string>, peers: Iterable<string> = []): Promise<string[]> {
    const { state, uplinkMtu, uplinkMac } = await this.read();
    const cmds = tunnelPlan(state, backends, uplinkMtu, { peers, ...(uplinkMac && { uplinkMac }) });
    if (cmds.length > 0) await run([...this.ip, "-batch", "-"], cmds.map((c) => `${c}\n`).join(""));
    return cmds;
  }
}
