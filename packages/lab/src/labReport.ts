// What `npm run lab` shows once the lab is up, and what the end-to-end test checks: the router's
// route to the VIP (the ECMP paper's Fig. 12) and how requests from the client spread over LB nodes
// and backends. The LB node of each request is the router's own choice for that request's 5-tuple
// (`ip route get … sport P`, with the same L4 hash forwarding uses), so nothing is inferred.
import type { LabPlan } from "./labPlan.ts";
import { execCommand } from "./netns/netnsLab.ts";
import { parseNextHops, type NextHop } from "./netns/frrRouter.ts";

export interface Spread {
  requests: number;
  failed: number;
  /** Requests per backend (the pod IP each answer names). */
  backends: Record<string, number>;
  /** Requests per LB node (the router's next hop for each request). */
  lbNodes: Record<string, number>;
}

async function inNetns(netns: string, command: string, args: string[]): Promise<string> {
  const r = await execCommand("ip", ["netns", "exec", netns, command, ...args], { timeoutMs: 10_000 });
  if (r.code !== 0)
    throw new Error(`${netns}: ${command} ${args.join(" ")}: ${r.stderr.trim() || `exit ${r.code}`}`);
  return r.stdout;
}

/** The router's kernel route to `vip`: its next hops, sorted. */
export async function routerNextHops(plan: LabPlan, vip: string): Promise<NextHop[]> {
  return parseNextHops(await inNetns(plan.router.netns, "ip", ["-j", "route", "show", "exact", `${vip}/32`]));
}

/** `ip route show` of the VIP on the router, as the paper prints it. */
export function routerRouteText(plan: LabPlan, vip: string): Promise<string> {
  return inNetns(plan.router.netns, "ip", ["route", "show", "exact", `${vip}/32`]);
}

/** The LB node a request from the client with source port `sport` goes to. */
async function nextHopFor(plan: LabPlan, vip: string, sport: number, dport: number): Promise<string> {
  const out = await inNetns(plan.router.netns, "ip", [
    ...["-j", "route", "get", vip, "from", plan.client.ip, "iif", plan.router.clientIface],
    ...["ipproto", "tcp", "sport", String(sport), "dport", String(dport)],
  ]);
  const [route] = JSON.parse(out) as { gateway?: string }[];
  return route?.gateway ?? "none";
}

/** `count` HTTP requests from the client to the VIP, each from its own source port. */
export async function curlSpread(plan: LabPlan, vip: string, count: number, port = 80): Promise<Spread> {
  const nodeByIp = new Map(plan.nodes.map((n) => [n.ip, n.name]));
  const spread: Spread = { requests: count, failed: 0, backends: {}, lbNodes: {} };
  const base = 20_000 + Math.floor(Math.random() * 20_000);
  for (let i = 0; i < count; i++) {
    const sport = base + i;
    const r = await execCommand(
      "ip",
      [
        "netns",
        "exec",
        plan.client.netns,
        "curl",
        "-s",
        "--max-time",
        "3",
        "--local-port",
        String(sport),
        `http://${vip}:${port}/`,
      ],
      { timeoutMs: 10_000 },
    );
    const backend = r.stdout.trim();
    if (r.code !== 0 || backend === "") {
      spread.failed++;
      continue;
    }
    spread.backends[backend] = (spread.backends[backend] ?? 0) + 1;
    const hop = await nextHopFor(plan, vip, sport, port);
    const lb = nodeByIp.get(hop) ?? hop;
    spread.lbNodes[lb] = (spread.lbNodes[lb] ?? 0) + 1;
  }
  return spread;
}

/** The spread as a small table: one line per LB node and per backend. */
export function formatSpread(s: Spread): string {
  const rows = (title: string, counts: Record<string, number>) => [
    `${title}:`,
    ...Object.entries(counts)
      .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
      .map(
        ([k, n]) =>
          `  ${k.padEnd(16)} ${String(n).padStart(4)}  ${"#".repeat(Math.round((n / s.requests) * 50))}`,
      ),
  ];
  return [
    `${s.requests - s.failed} of ${s.requests} requests answered`,
    ...rows("per LB node (the router's ECMP choice)", s.lbNodes),
    ...rows("per backend pod (the IP it answered with)", s.backends),
  ].join("\n");
}
