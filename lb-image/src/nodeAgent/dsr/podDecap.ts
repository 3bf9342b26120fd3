// The tc BPF fast path of a backend pod's DSR decapsulation (lb-image/fastpath/bpf/dsr_decap.c),
// read back and diffed as pure functions: our filter on the ingress of the pod's uplink (the
// interface holding its address), found by its fixed pref and program name, replaced when its
// program's tag is not the object's; the clsact qdisc it hangs on added where absent. The VXLAN
// device stays beside it (podDsrState.ts) and decapsulates whatever the program declines.
//
// A clsact qdisc may be a CNI's: it is removed only where this agent added it (remembered while it
// runs, so a restarted agent leaves an empty one behind) and nothing else is attached to it.
//
// The object's tag (what the kernel hashes the loaded program to; the hash differs between kernels,
// so it cannot be computed from the file) is learnt once by loading the object on `lo` of a
// throwaway network namespace: objectTagProbe() and parseObjectTag().
import { z } from "zod";

/**
 * Our filter's pref: late in the chain, so that a CNI's own filters (low prefs) see the tunnel
 * packet first, as they do without us; the program passes what it declines on to later filters.
 */
export const DECAP_PREF = 65000;
/** The program's function name in dsr_decap.c, which tc shows as the filter's `prog.name`. */
export const DECAP_PROGRAM = "dsr_decap";

export interface DecapDevice {
  name: string;
  clsact: boolean;
  /** Our filter's program tag, when our filter is there. */
  tag: string | undefined;
  /** Filters on the device's ingress and egress besides ours. */
  others: number;
  /** Another filter holds our pref: we never replace it. */
  prefTaken: boolean;
  /** This agent added the clsact qdisc (so may remove it once nothing else uses it). */
  clsactOurs: boolean;
}

/** What the pod should have: our filter, with the object's program, on its uplink. */
export interface DecapWanted {
  device: string;
  object: string;
  tag: string;
}

/** One `tc` command in the pod's namespace. */
export interface TcStep {
  tc: string[];
}

const linksSchema = z.array(
  z
    .object({
      ifname: z.string(),
      addr_info: z.array(z.object({ family: z.string(), local: z.string() }).loose()).default([]),
    })
    .loose(),
);

const filtersSchema = z.array(
  z
    .object({
      pref: z.number(),
      options: z
        .object({ prog: z.object({ name: z.string().optional(), tag: z.string().optional() }).loose() })
        .loose()
        .optional(),
    })
    .loose(),
);
const qdiscsSchema = z.array(z.object({ kind: z.string() }).loose());

/**
 * From `ip -j addr show` in the pod: the pod's uplink (the interface holding `podIp`; undefined
 * without it), and every interface with an IPv4 address besides lo (where an earlier uplink was).
 */
export function podUplinks(addrJson: string, podIp: string): { uplink: string | undefined; all: string[] } {
  const links = linksSchema
    .parse(JSON.parse(addrJson || "[]"))
    .filter((l) => l.ifname !== "lo" && l.addr_info.some((a) => a.family === "inet"));
  return {
    uplink: links.find((l) => l.addr_info.some((a) => a.local === podIp))?.ifname,
    all: links.map((l) => l.ifname),
  };
}

/** The batch that readDevices() parses: per device, its qdiscs and its ingress and egress filters. */
export function readBatch(devices: string[]): string {
  return devices
    .flatMap((d) => [`qdisc show dev ${d}`, `filter show dev ${d} ingress`, `filter show dev ${d} egress`])
    .map((line) => `${line}\n`)
    .join("");
}

/** From `tc -j -batch -` fed readBatch(devices): one JSON array a line, three per device. */
export function parseDevices(devices: string[], output: string, clsactOurs: Set<string>): DecapDevice[] {
  const lists = output
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as unknown);
  if (lists.length !== devices.length * 3)
    throw new Error(`tc answered ${lists.length} listings for ${devices.length * 3} questions`);
  return devices.map((name, i) => {
    const clsact = qdiscsSchema.parse(lists[3 * i]).some((q) => q.kind === "clsact");
    // tc lists each pref once bare (the chain's header) and once per filter, with its options.
    // Whatever is at another pref (or on egress) is someone else's.
    const ingress = filtersSchema.parse(lists[3 * i + 1]);
    const egress = filtersSchema.parse(lists[3 * i + 2]);
    const atPref = ingress.filter((f) => f.pref === DECAP_PREF && f.options);
    const ours = atPref.find((f) => f.options?.prog.name === DECAP_PROGRAM);
    return {
      name,
      clsact,
      tag: ours?.options?.prog.tag,
      others: ingress.filter((f) => f.pref !== DECAP_PREF).length + egress.length,
      prefTaken: atPref.some((f) => f !== ours),
      clsactOurs: clsactOurs.has(name),
    };
  });
}

/**
 * The steps that leave our filter only on `wanted`'s device (none: on no device), with the
 * object's program; a clsact qdisc added where needed, and removed where we added it and it is
 * left empty.
 */
export function decapSteps(devices: DecapDevice[], wanted: DecapWanted | undefined): TcStep[] {
  const steps: TcStep[] = [];
  for (const d of devices) {
    if (d.name === wanted?.device) continue;
    if (d.tag !== undefined)
      steps.push({ tc: ["filter", "del", "dev", d.name, "ingress", "pref", String(DECAP_PREF)] });
    if (d.clsact && d.clsactOurs && d.others === 0)
      steps.push({ tc: ["qdisc", "del", "dev", d.name, "clsact"] });
  }
  if (!wanted) return steps;
  const d = devices.find((x) => x.name === wanted.device);
  if (d?.prefTaken)
    throw new Error(
      `another filter holds pref ${DECAP_PREF} on ${wanted.device} ingress: no BPF decapsulation`,
    );
  if (!d?.clsact) steps.push({ tc: ["qdisc", "add", "dev", wanted.device, "clsact"] });
  if (d?.tag !== wanted.tag)
    steps.push({
      tc: [
        ..."filter replace dev".split(" "),
        wanted.device,
        ..."ingress pref".split(" "),
        String(DECAP_PREF),
        ..."handle 1 bpf direct-action obj".split(" "),
        wanted.object,
        ..."sec tc".split(" "),
      ],
    });
  return steps;
}

/** The batch objectTagProbe runs in a throwaway namespace (`unshare --net tc -j -batch -`). */
export function objectTagProbe(object: string): string {
  if (/\s/.test(object)) throw new Error(`tc's batch cannot name ${JSON.stringify(object)}: no white space`);
  return [
    "qdisc add dev lo clsact",
    `filter add dev lo ingress pref ${DECAP_PREF} handle 1 bpf direct-action obj ${object} sec tc`,
    "filter show dev lo ingress",
  ]
    .map((line) => `${line}\n`)
    .join("");
}

/** The object's program tag, from objectTagProbe's output. */
export function parseObjectTag(output: string): string {
  const lists = output
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => filtersSchema.parse(JSON.parse(l)));
  const tag = lists.flat().find((f) => f.options?.prog.name === DECAP_PROGRAM)?.options?.prog.tag;
  if (!tag) throw new Error(`the loaded object shows no program ${DECAP_PROGRAM}`);
  return tag;
}
