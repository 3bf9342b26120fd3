// The LB pod's half of the DSR tunnels (dsrTunnel.ts): the metadata VXLAN device, the permanent
// neighbour of its link-local next hop, and per backend pod an ip rule (its mark -> its table) and the
// table's one encapsulating route. Read back as a whole each time (a few `ip -j` listings), planned as
// a pure function, applied by diff in one `ip -batch`: everything ours carries protocol 212, so a
// restart adopts it and nothing else in the namespace is touched.
import { z } from "zod";
import { run } from "../exec.ts";
import {
  DSR_BACKEND_MAC,
  DSR_DEVICE,
  DSR_LB_MAC,
  DSR_NEXT_HOP,
  DSR_OVERHEAD,
  DSR_UDP_PORT,
  DSR_VNI,
  backendMark,
} from "./dsrTunnel.ts";

/** Our `protocol` on rules and routes (unassigned in iproute2's rt_protos; the node agent has 211). */
export const DSR_PROTO = 212;
/**
 * Rule preferences, after `local` (0) and before `main` (32766). The encapsulated packet inherits the
 * inner packet's mark, and its own route lookup (a locally made packet: `iif lo`) must not land in
 * the tunnel again: `main` first for those.
 */
export const LOCAL_RULE_PREF = 31000;
export const BACKEND_RULE_PREF = 31001;

/** What the kernel holds of ours, as read back. */
export interface TunnelState {
  device?: { vxlanExternal: boolean; port: number; mac: string; mtu: number; up: boolean };
  neighbour?: { lladdr: string; permanent: boolean };
  rules: { pref: number; iif?: string; fwmark?: number; table: string }[];
  /** Table id -> the encapsulation's destination (the backend pod). */
  routes: Map<number, string | undefined>;
}

/** The `ip` commands (one per line of `ip -batch`) that turn `found` into the tunnels to `backends`. */
export function tunnelPlan(found: TunnelState, backends: Iterable<string>, uplinkMtu: number): string[] {
  const want = new Map([...backends].map((ip) => [backendMark(ip), ip]));
  const cmds: string[] = [];
  const rule = (r: TunnelState["rules"][number]) =>
    `rule del pref ${r.pref}${r.iif ? ` iif ${r.iif}` : ""}${r.fwmark !== undefined ? ` fwmark ${r.fwmark}` : ""} lookup ${r.table} protocol ${DSR_PROTO}`;
  if (want.size === 0) {
    // Nothing served by DSR: nothing of ours stays (the device takes its neighbour along).
    for (const r of found.rules) cmds.push(rule(r));
    for (const table of found.routes.keys()) cmds.push(`route del default table ${table} proto ${DSR_PROTO}`);
    if (found.device) cmds.push(`link del ${DSR_DEVICE}`);
    return cmds;
  }
  const mtu = uplinkMtu - DSR_OVERHEAD;
  const d = found.device;
  if (d && (!d.vxlanExternal || d.port !== DSR_UDP_PORT)) cmds.push(`link del ${DSR_DEVICE}`);
  const fresh = !d || !d.vxlanExternal || d.port !== DSR_UDP_PORT;
  if (fresh) cmds.push(`link add ${DSR_DEVICE} type vxlan external dstport ${DSR_UDP_PORT}`);
  if (fresh || d.mac !== DSR_LB_MAC || d.mtu !== mtu || !d.up)
    cmds.push(`link set ${DSR_DEVICE} address ${DSR_LB_MAC} mtu ${mtu} up`);
  const n = found.neighbour;
  if (fresh || !n || n.lladdr !== DSR_BACKEND_MAC || !n.permanent)
    cmds.push(`neigh replace ${DSR_NEXT_HOP} lladdr ${DSR_BACKEND_MAC} dev ${DSR_DEVICE} nud permanent`);

  const isLocal = (r: TunnelState["rules"][number]) =>
    r.pref === LOCAL_RULE_PREF && r.iif === "lo" && r.fwmark === undefined && r.table === "main";
  const isBackend = (r: TunnelState["rules"][number]) =>
    r.pref === BACKEND_RULE_PREF &&
    r.iif === undefined &&
    r.fwmark !== undefined &&
    want.has(r.fwmark) &&
    r.table === String(r.fwmark);
  const kept = new Set<number>();
  let local = false;
  for (const r of found.rules) {
    if (isLocal(r) && !local) local = true;
    else if (isBackend(r) && !kept.has(r.fwmark!)) kept.add(r.fwmark!);
    else cmds.push(rule(r));
  }
  if (!local) cmds.push(`rule add pref ${LOCAL_RULE_PREF} iif lo lookup main protocol ${DSR_PROTO}`);
  for (const table of found.routes.keys())
    if (!want.has(table)) cmds.push(`route del default table ${table} proto ${DSR_PROTO}`);
  for (const [mark, ip] of want) {
    if (fresh || found.routes.get(mark) !== ip)
      cmds.push(
        `route replace default via ${DSR_NEXT_HOP} dev ${DSR_DEVICE} onlink encap ip id ${DSR_VNI} dst ${ip} table ${mark} proto ${DSR_PROTO}`,
      );
    if (!kept.has(mark))
      cmds.push(`rule add pref ${BACKEND_RULE_PREF} fwmark ${mark} lookup ${mark} protocol ${DSR_PROTO}`);
  }
  return cmds;
}

const linkSchema = z.array(
  z.object({
    address: z.string(),
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
  z.object({ dst: z.string(), lladdr: z.string().optional(), state: z.array(z.string()) }),
);
const ruleSchema = z.array(
  z.object({
    priority: z.number(),
    iif: z.string().optional(),
    fwmark: z.string().optional(),
    table: z.string(),
    protocol: z.string().optional(),
  }),
);
// An encap route prints "dst" twice (the prefix, then the tunnel's); JSON.parse keeps the last.
const routeSchema = z.array(z.object({ dst: z.string(), table: z.string(), encap: z.string().optional() }));

/** Parses the four listings into the state of ours (tests feed captured text). */
export function parseTunnelState(listings: {
  link: string | undefined;
  neigh: string;
  rules: string;
  routes: string;
}): TunnelState {
  const link = listings.link === undefined ? undefined : linkSchema.parse(JSON.parse(listings.link))[0];
  const neighbour = neighSchema.parse(JSON.parse(listings.neigh || "[]")).find((n) => n.dst === DSR_NEXT_HOP);
  return {
    ...(link && {
      device: {
        vxlanExternal: link.linkinfo?.info_kind === "vxlan" && link.linkinfo.info_data?.external === true,
        port: link.linkinfo?.info_data?.port ?? 0,
        mac: link.address,
        mtu: link.mtu,
        up: link.flags.includes("UP"),
      },
    }),
    ...(neighbour && {
      neighbour: { lladdr: neighbour.lladdr ?? "", permanent: neighbour.state.includes("PERMANENT") },
    }),
    rules: ruleSchema
      .parse(JSON.parse(listings.rules || "[]"))
      .filter((r) => r.protocol === String(DSR_PROTO))
      .map((r) => ({
        pref: r.priority,
        ...(r.iif !== undefined && { iif: r.iif }),
        ...(r.fwmark !== undefined && { fwmark: Number(r.fwmark) }),
        table: r.table,
      })),
    routes: new Map(
      routeSchema
        .parse(JSON.parse(listings.routes || "[]"))
        .map((r) => [Number(r.table), r.encap === "ip" ? r.dst : undefined]),
    ),
  };
}

/** Applies tunnelPlan to the namespace `ip` works in. */
export class LbTunnels {
  private readonly ip: [string, ...string[]];

  constructor(ip: [string, ...string[]] = ["ip"]) {
    this.ip = ip;
  }

  async read(): Promise<TunnelState> {
    const links = JSON.parse(await run([...this.ip, "-j", "link", "show"])) as { ifname: string }[];
    const exists = links.some((l) => l.ifname === DSR_DEVICE);
    const [link, neigh, rules, routes] = await Promise.all([
      exists ? run([...this.ip, "-j", "-d", "link", "show", "dev", DSR_DEVICE]) : undefined,
      exists ? run([...this.ip, "-j", "neigh", "show", "dev", DSR_DEVICE]) : "[]",
      run([...this.ip, "-j", "rule", "show"]),
      run([...this.ip, "-j", "route", "show", "table", "all", "proto", String(DSR_PROTO)]),
    ]);
    return parseTunnelState({ link, neigh, rules, routes });
  }

  /** The MTU of the interface the default route leaves by (the pod's eth0); 1500 without one. */
  async uplinkMtu(): Promise<number> {
    const routes = JSON.parse(await run([...this.ip, "-j", "route", "show", "default"])) as {
      dev?: string;
    }[];
    const dev = routes.find((r) => r.dev && r.dev !== DSR_DEVICE)?.dev;
    if (!dev) return 1500;
    const [link] = JSON.parse(await run([...this.ip, "-j", "link", "show", "dev", dev])) as { mtu: number }[];
    return link?.mtu ?? 1500;
  }

  /** Makes the tunnels exactly those to `backends`; returns the commands it had to run. */
  async apply(backends: Iterable<string>): Promise<string[]> {
    const cmds = tunnelPlan(await this.read(), backends, await this.uplinkMtu());
    if (cmds.length > 0) await run([...this.ip, "-batch", "-"], cmds.map((c) => `${c}\n`).join(""));
    return cmds;
  }
}
