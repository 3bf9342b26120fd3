// /proc/net/ip_vs: the one place that shows each service's real servers in the kernel's own list
// order (`ipvsadm -Sn` sorts them), which is the order ip_vs_mh builds its table in.
import { serviceKey } from "../model.ts";

/** Backend keys ("ip:port") per service key, in kernel list order (the last added first). */
export function parseServerOrder(text: string): Map<string, string[]> {
  const order = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of text.split("\n")) {
    const service = /^(TCP|UDP)\s+([0-9A-F]{8}):([0-9A-F]{4})\s/.exec(line);
    if (service) {
      const [, proto, addr, port] = service;
      current = [];
      order.set(
        serviceKey({ protocol: proto === "TCP" ? "tcp" : "udp", vip: ipOf(addr!), port: portOf(port!) }),
        current,
      );
      continue;
    }
    const server = /^\s+->\s+([0-9A-F]{8}):([0-9A-F]{4})\s/.exec(line);
    if (server) {
      current?.push(`${ipOf(server[1]!)}:${portOf(server[2]!)}`);
      continue;
    }
    // Services we do not make (FWM, IPv6) hold servers we must not count as another's.
    if (/^\S/.test(line)) current = undefined;
  }
  return order;
}

function ipOf(hex: string): string {
  return [0, 2, 4, 6].map((i) => parseInt(hex.slice(i, i + 2), 16)).join(".");
}

function portOf(hex: string): number {
  return parseInt(hex, 16);
}
