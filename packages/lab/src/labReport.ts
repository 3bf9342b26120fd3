// What `npm run lab` shows once the lab is up, and what the end-to-end test checks: the router's
// route to the VIP (the ECMP paper's Fig. 12) and how requests from the client spread over LB nodes
// and backends. The LB node of each request is the router's own choice for that request's 5-tuple
// (`ip route get … sport P`, with the same L4 hash forwarding uses), so nothing is inferred.
import { execCommand } from "./netns/netnsLab.ts";
import { parseNextHops, type NextHop } from "./netns/frrRouter.ts";

/**
 * Where requests come from, the router they cross and the nodes behind it: the lab's plan, or a test's
 * own network of the same shape.
 */
export interface RequestPath {
  client: { netns: string; ip: string };
  router: { netns: string; clientIface: string };
  nodes: { name: string; ip: string }[];
}

export interface Spread {
  requests: number;
  failed: number;
  /** Requests per backend (the pod IP each answer names). */
  backends: Record<string, number>;
  /** Requests per LB node (the router's next hop for each request). */
  lbNodes: Record<string, number>;
  /** Per failed request: the LB node it went through, its source port and curl's error. */
  errors: string[];
}

async function inNetns(netns: string, command: string, args: string[]): Promise<string> {
  const r = await execCommand("ip", ["netns", "exec", netns, command, ...args], { timeoutMs: 10_000 });
  if (r.code !== 0)
    throw new Error(`${netns}: ${command} ${args.join(" ")}: ${r.stderr.trim() || `exit ${r.code}`}`);
  return r.stdout;
}

/** The router's kernel route to `vip`: its next hops, sorted. */
export async function routerNextHops(plan: Pick<RequestPath, "router">, vip: string): Promise<NextHop[]> {
  return parseNextHops(await inNetns(plan.router.netns, "ip", ["-j", "route", "show", "exact", `${vip}/32`]));
}

/** `ip route show` of the VIP on the router, as the paper prints it. */
export function routerRouteText(plan: Pick<RequestPath, "router">, vip: string): Promise<string> {
  return inNetns(plan.router.netns, "ip", ["route", "show", "exact", `${vip}/32`]);
}

/** The LB node a request from the client with source port `sport` goes to. */
async function nextHopFor(plan: RequestPath, vip: string, sport: number, dport: number): Promise<string> {
  const out = await inNetns(plan.router.netns, "ip", [
    ...["-j", "route", "get", vip, "from", plan.client.ip, "iif", plan.router.clientIface],
    ...["ipproto", "tcp", "sport", String(sport), "dport", String(dport)],
  ]);
  const [route] = JSON.parse(out) as { gateway?: string }[];
  return route?.gateway ?? "none";
}

/** `count` HTTP requests from the client to the VIP, each a new connection. */
export async function curlSpread(plan: RequestPath, vip: string, count: number, port = 80): Promise<Spread> {
  const nodeByIp = new Map(plan.nodes.map((n) => [n.ip, n.name]));
  const spread: Spread = { requests: count, failed: 0, backends: {}, lbNodes: {}, errors: [] };
  for (let i = 0; i < count; i++) {
    // The kernel picks the source port (one chosen here could still be in TIME_WAIT from an earlier
    // request); curl prints it, and the router's choice for it is looked up after.
    const r = await execCommand(
      "ip",
      [
        ...["netns", "exec", plan.client.netns, "curl", "-sS", "--max-time", "3"],
        ...["-w", "\\n%{local_port}", `http://${vip}:${port}/`],
      ],
      { timeoutMs: 10_000 },
    );
    const lines = r.stdout.trim().split("\n");
    const sport = Number(lines.pop());
    const backend = lines.join("\n").trim();
    // The router's choice is only looked up; a lookup that fails (the route gone meanwhile) names
    // the request's node as its error, and the request counts as what curl saw.
    const hop =
      sport > 0 ? await nextHopFor(plan, vip, sport, port).catch((e: Error) => `? (${e.message})`) : "none";
    const lb = nodeByIp.get(hop) ?? hop;
    if (r.code !== 0 || backend === "") {
      spread.failed++;
      spread.errors.push(`via ${lb}, port ${sport || "?"}: curl exit ${r.code}: ${r.stderr.trim()}`);
      continue;
    }
    spread.backends[backend] = (spread.backends[backend] ?? 0) + 1;
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
    ...(s.errors.length > 0 ? ["failed:", ...s.errors.slice(0, 5).map((e) => `  ${e}`)] : []),
  ].join("\n");
}
