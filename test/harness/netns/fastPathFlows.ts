// The DSR fast path's flow table in an LB pod's namespace, as the kernel holds it: found through the
// pod's loader (its process in that namespace holds the map's file descriptor; /proc's fdinfo names
// the map's id) and dumped with bpftool. Map ids are global, so this runs on the host. The layout
// is lb-image/fastpath/bpf/dsr_lb.c's struct flow_key / struct flow.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";

/** The loader's name as /proc/PID/comm shows it (15 characters). */
export const LOADER_COMM = "portable-lb-fastpath".slice(0, 15);
/** BPF_MAP_TYPE_LRU_HASH with flow_key (16 bytes) → flow (16 bytes): the flow table. */
const FLOWS = { map_type: "9", key_size: "16", value_size: "16" };

export interface FastPathFlow {
  client: string;
  clientPort: number;
  vip: string;
  port: number;
  backend: string;
  /** When a packet last refreshed it (bpf_ktime_get_ns: CLOCK_MONOTONIC, ns). */
  seenNs: bigint;
}

const read = (path: string) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined; // a process or descriptor gone meanwhile
  }
};

/** The loader running in the network namespace `netns` (its /run/netns name); undefined: none. */
export function loaderPid(netns: string): number | undefined {
  const want = statSync(`/run/netns/${netns}`).ino;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    if (read(`/proc/${pid}/comm`)?.trim() !== LOADER_COMM) continue;
    try {
      if (statSync(`/proc/${pid}/ns/net`).ino === want) return Number(pid);
    } catch {
      continue;
    }
  }
  return undefined;
}

function flowMapId(pid: number): number | undefined {
  for (const fd of readdirSync(`/proc/${pid}/fdinfo`)) {
    const info = read(`/proc/${pid}/fdinfo/${fd}`) ?? "";
    const field = (name: string) => new RegExp(`^${name}:\\s+(\\S+)$`, "m").exec(info)?.[1];
    if (Object.entries(FLOWS).every(([k, v]) => field(k) === v)) return Number(field("map_id"));
  }
  return undefined;
}

const bytes = (hex: string[]) => Buffer.from(hex.map((h) => Number.parseInt(h, 16)));
const ip = (b: Buffer, at: number) => [...b.subarray(at, at + 4)].join(".");

/** The flows in the fast path's table in `netns`; empty when no loader runs there. */
export function fastPathFlows(netns: string): FastPathFlow[] {
  const pid = loaderPid(netns);
  if (pid === undefined) return [];
  const id = flowMapId(pid);
  if (id === undefined) throw new Error(`the fast path loader ${pid} in ${netns} holds no flow table`);
  const dump = JSON.parse(
    execFileSync("bpftool", ["-j", "map", "dump", "id", String(id)], { encoding: "utf8" }),
  ) as {
    key: string[];
    value: string[];
  }[];
  return dump.map((e) => {
    const key = bytes(e.key);
    const value = bytes(e.value);
    return {
      client: ip(key, 0),
      vip: ip(key, 4),
      clientPort: key.readUInt16BE(8),
      port: key.readUInt16BE(10),
      backend: ip(value, 0),
      seenNs: value.readBigUInt64LE(8),
    };
  });
}
