// The `ipvsadm -S -n` text format, both ways: we parse it to read the kernel's state and write the
// same command syntax for `ipvsadm -R` batches.
import { sortIpvs, type ForwardingMethod, type IpvsServer, type IpvsService } from "./ipvsState.ts";

const METHOD_FLAG: Record<ForwardingMethod, string> = { masq: "-m", gate: "-g", ipip: "-i" };

export function serviceAddress(s: Pick<IpvsService, "protocol" | "vip" | "port">): string {
  return `${s.protocol === "tcp" ? "-t" : "-u"} ${s.vip}:${s.port}`;
}

export function serviceSpec(s: IpvsService): string {
  return `${serviceAddress(s)} -s ${s.scheduler}${s.flags.length ? ` -b ${s.flags.join(",")}` : ""}`;
}

export function serverSpec(s: IpvsService, r: IpvsServer): string {
  return `${serviceAddress(s)} -r ${r.ip}:${r.port} ${METHOD_FLAG[r.method]} -w ${r.weight}`;
}

/** The full state as `ipvsadm -S -n` prints it (what a restore of an empty table needs). */
export function formatSave(state: IpvsService[]): string {
  return sortIpvs(state)
    .flatMap((s) => [`-A ${serviceSpec(s)}`, ...s.servers.map((r) => `-a ${serverSpec(s, r)}`)])
    .map((l) => `${l}\n`)
    .join("");
}

/** An `ipvsadm -R` script that replaces whatever IPVS holds with `state` (clear, then restore). */
export function replaceScript(state: IpvsService[]): string {
  return `-C\n${formatSave(state)}`;
}

export class IpvsParseError extends Error {}

function hostPort(text: string | undefined, line: string): { ip: string; port: number } {
  const m = /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(text ?? "");
  if (!m)
    throw new IpvsParseError(
      `ipvsadm -Sn: expected IPv4 address:port, got ${JSON.stringify(text)} in: ${line}`,
    );
  return { ip: m[1]!, port: Number(m[2]) };
}

export type IpvsOp = "-A" | "-E" | "-D" | "-a" | "-e" | "-d";

export interface IpvsCommand {
  op: IpvsOp;
  service: Pick<IpvsService, "protocol" | "vip" | "port"> & Partial<Pick<IpvsService, "scheduler" | "flags">>;
  server?: Pick<IpvsServer, "ip" | "port"> & Partial<Pick<IpvsServer, "weight" | "method">>;
}

const OPS = new Set<string>(["-A", "-E", "-D", "-a", "-e", "-d"]);

/** One ipvsadm command line (as in `-S` output and `-R` input). Unknown syntax is an error. */
export function parseCommand(line: string): IpvsCommand {
  const tokens = line.trim().split(/\s+/);
  const op = tokens[0]!;
  if (!OPS.has(op)) throw new IpvsParseError(`ipvsadm: unexpected command: ${line}`);
  const opts = new Map<string, string | true>();
  for (let i = 1; i < tokens.length; i++) {
    const t = tokens[i]!;
    const next = tokens[i + 1];
    if (next !== undefined && !next.startsWith("-")) {
      opts.set(t, next);
      i++;
    } else opts.set(t, true);
  }
  const tcp = opts.get("-t");
  const udp = opts.get("-u");
  if (typeof tcp !== "string" && typeof udp !== "string") {
    throw new IpvsParseError(
      `ipvsadm: only TCP/UDP virtual services are supported (fwmark services are not ours): ${line}`,
    );
  }
  const { ip: vip, port } = hostPort(typeof tcp === "string" ? tcp : (udp as string), line);
  const scheduler = opts.get("-s");
  const flags = opts.get("-b");
  const service: IpvsCommand["service"] = {
    protocol: typeof tcp === "string" ? "tcp" : "udp",
    vip,
    port,
    ...(typeof scheduler === "string" && { scheduler }),
    ...(typeof flags === "string" && { flags: flags.split(",").filter(Boolean).sort() }),
  };
  if (op === "-A" || op === "-E" || op === "-D") return { op, service };
  const { ip, port: rport } = hostPort(opts.get("-r") as string | undefined, line);
  const weight = opts.get("-w");
  // -Sn names the tunnel type of every -i server; ours are IPIP (the default), anything else is not.
  const tunType = opts.get("--tun-type");
  if (tunType !== undefined && tunType !== "ipip")
    throw new IpvsParseError(`ipvsadm: tunnel type ${String(tunType)} is not ours (only ipip): ${line}`);
  const method: ForwardingMethod | undefined = opts.has("-g")
    ? "gate"
    : opts.has("-i")
      ? "ipip"
      : opts.has("-m")
        ? "masq"
        : undefined;
  return {
    op: op as IpvsOp,
    service,
    server: {
      ip,
      port: rport,
      ...(typeof weight === "string" && { weight: Number(weight) }),
      ...(method && { method }),
    },
  };
}

/** Parses `ipvsadm -S -n` output (only -A and -a lines); the servers' kernel order is not in it. */
export function parseSave(text: string): IpvsService[] {
  const services = new Map<string, IpvsService>();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const { op, service, server } = parseCommand(line);
    const key = `${service.protocol}:${service.vip}:${service.port}`;
    if (op === "-A") {
      services.set(key, {
        ...service,
        scheduler: service.scheduler ?? "wlc",
        flags: service.flags ?? [],
        servers: [],
        // -Sn sorts real servers; the kernel's order is read from /proc/net/ip_vs (ipvsProc.ts).
        inOrder: true,
      });
    } else if (op === "-a" && server) {
      const svc = services.get(key);
      if (!svc) throw new IpvsParseError(`ipvsadm -Sn: real server before its virtual service: ${line}`);
      // ipvsadm defaults: weight 1, direct routing (-g).
      svc.servers.push({
        ip: server.ip,
        port: server.port,
        weight: server.weight ?? 1,
        method: server.method ?? "gate",
      });
    } else {
      throw new IpvsParseError(`ipvsadm -Sn: unexpected line: ${line}`);
    }
  }
  return sortIpvs([...services.values()]);
}
