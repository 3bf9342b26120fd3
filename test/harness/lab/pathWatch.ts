// What the lab's router does with a VIP, set against what each LB node can deliver, sampled side by
// side while a fault plays out. "Can deliver" is asked of the data path itself: the client sends a
// request that the router must forward through one given LB node (policy routing by a source
// address of the client's per node, test-owned rules and tables in the router's namespace), so a
// node counts as delivering exactly when a request through it is answered.
import { execCommand, type LabPlan, routerNextHops } from "@portable-lb/lab";
import { cidrRange, numberToIpv4 } from "@portable-lb/core/config";

export interface PathSample {
  /** ms since the epoch */
  t: number;
  /** The router's next hops for the VIP (LB node addresses), sorted. */
  hops: string[];
  /** The LB nodes a request through which was answered. */
  delivering: string[];
}

const TABLE_BASE = 200;
const lbNodes = (plan: LabPlan) => plan.nodes.filter((n) => n.role === "lb");
/** The client's source address that the router sends through LB node `i` (0-based). */
const sourceFor = (plan: LabPlan, i: number) => numberToIpv4(cidrRange(plan.client.cidr).first + 200 + i);

async function run(netns: string, args: string[]): Promise<string> {
  const r = await execCommand("ip", ["netns", "exec", netns, ...args], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`${netns}: ${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout;
}

export class PathWatch {
  readonly plan: LabPlan;
  readonly vip: string;
  readonly samples: PathSample[] = [];
  private stopped = false;
  private loop: Promise<void> | undefined;

  private constructor(plan: LabPlan, vip: string) {
    this.plan = plan;
    this.vip = vip;
  }

  /** Adds the per-node paths (idempotent), and starts sampling every `everyMs`. */
  static async start(plan: LabPlan, vip: string, everyMs = 200): Promise<PathWatch> {
    for (const [i, node] of lbNodes(plan).entries()) {
      const source = sourceFor(plan, i);
      const table = String(TABLE_BASE + i);
      await run(plan.client.netns, ["ip", "addr", "replace", `${source}/32`, "dev", "lo"]);
      await run(plan.router.netns, ["ip", "route", "replace", `${vip}/32`, "via", node.ip, "table", table]);
      const rules = await run(plan.router.netns, ["ip", "rule", "show", "from", source]);
      if (!rules.includes(`lookup ${table}`))
        await run(plan.router.netns, [
          "ip",
          "rule",
          "add",
          "from",
          source,
          "lookup",
          table,
          "priority",
          table,
        ]);
    }
    const w = new PathWatch(plan, vip);
    w.loop = w.sample(everyMs);
    return w;
  }

  /** Stops sampling; the per-node paths stay for the next watch (remove() takes them away). */
  async stop(): Promise<PathSample[]> {
    this.stopped = true;
    await this.loop;
    return this.samples;
  }

  /** Removes the client addresses and the router's rules and tables this added. */
  static async remove(plan: LabPlan, vip: string): Promise<void> {
    for (const i of lbNodes(plan).keys()) {
      const source = sourceFor(plan, i);
      const table = String(TABLE_BASE + i);
      await execCommand("ip", [
        "netns",
        "exec",
        plan.router.netns,
        "ip",
        "rule",
        "del",
        "from",
        source,
        "lookup",
        table,
      ]);
      await execCommand("ip", [
        "netns",
        "exec",
        plan.router.netns,
        "ip",
        "route",
        "del",
        `${vip}/32`,
        "table",
        table,
      ]);
      await execCommand("ip", [
        "netns",
        "exec",
        plan.client.netns,
        "ip",
        "addr",
        "del",
        `${source}/32`,
        "dev",
        "lo",
      ]);
    }
  }

  /** Whether a request through LB node `ip` is answered now. */
  async delivers(ip: string): Promise<boolean> {
    const i = lbNodes(this.plan).findIndex((n) => n.ip === ip);
    const r = await execCommand(
      "ip",
      [
        ...["netns", "exec", this.plan.client.netns, "curl", "-s", "-o", "/dev/null", "--max-time", "1"],
        ...["--interface", sourceFor(this.plan, i), `http://${this.vip}/`],
      ],
      { timeoutMs: 5_000 },
    );
    return r.code === 0;
  }

  private async sample(everyMs: number): Promise<void> {
    const ips = lbNodes(this.plan).map((n) => n.ip);
    while (!this.stopped) {
      const t = Date.now();
      const [hops, delivering] = await Promise.all([
        routerNextHops(this.plan, this.vip).then((h) => h.map((x) => x.gateway).sort()),
        Promise.all(ips.map(async (ip) => ((await this.delivers(ip)) ? [ip] : []))).then((d) => d.flat()),
      ]);
      this.samples.push({ t, hops, delivering });
      await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (Date.now() - t))));
    }
  }
}

/** How long (ms, by samples) the router pointed at a node that did not deliver. */
export function undeliverableMs(samples: PathSample[]): number {
  let ms = 0;
  for (let i = 1; i < samples.length; i++) {
    const s = samples[i - 1]!;
    if (s.hops.some((h) => !s.delivering.includes(h))) ms += samples[i]!.t - s.t;
  }
  return ms;
}

/** The first sample time from which on every later sample satisfies `ok` (undefined if the last does not). */
export function settledAt(samples: PathSample[], ok: (s: PathSample) => boolean): number | undefined {
  let at: number | undefined;
  for (const s of samples) {
    if (!ok(s)) at = undefined;
    else at ??= s.t;
  }
  return at;
}
