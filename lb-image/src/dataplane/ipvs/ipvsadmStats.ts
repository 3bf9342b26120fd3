// Connections per virtual service from `ipvsadm -L -n --stats --exact`:
//   Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes
//     -> RemoteAddress:Port
//   TCP  10.1.1.1:80                        12       72       48     4812     6240
//     -> 10.244.0.11:8080                    6 …
// Only the virtual-service lines (not the "->" real servers) are read. The kernel folds its per-CPU
// counters into these every 2 s, so a scrape may lag that much.
import type { VipCounter } from "../model.ts";

export function parseStats(text: string): VipCounter[] {
  return text.split("\n").flatMap((line) => {
    const m = /^(TCP|UDP)\s+(\d+\.\d+\.\d+\.\d+):(\d+)\s+(\d+)\s/.exec(line);
    if (!m) return [];
    return [
      {
        protocol: m[1]!.toLowerCase() as "tcp" | "udp",
        vip: m[2]!,
        port: Number(m[3]),
        connections: Number(m[4]),
      },
    ];
  });
}
