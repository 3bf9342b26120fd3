// An IPVS test network inside the guest in which backends reply by their own route, as on a real
// cluster, not through the load balancer: every host has its own link to one router and a default
// route to it (no host is another's gateway).
//
//   client (10.0.0.2) ── router ──┬─ lb1..lbM (10.3.11.2, 10.3.12.2, ...; the VIPs local)
//                                 └─ b1..bN   (10.3.21.2, 10.3.22.2, ...; httpd on :80)
//
// The router sends the VIPs to one lb (routeVipsVia). A NAT-mode IPVS service whose traffic is not
// masqueraded then fails: the backend answers the client from its own address, through the router.
// The backends are also ready for IPVS tunnel mode (DSR): the ipip device up, the DSR VIP on `lo`,
// rp_filter off (decapsulated packets arrive on tunl0 from clients routed elsewhere), and
// arp_ignore/arp_announce so only the lb is asked for it. Each page names its backend's address;
// /cgi-bin/echo answers "got LINE from ADDRESS" for the first line of a POST body, so a client can
// send after a change and see who kept its connection; /cgi-bin/client answers "CLIENT at ADDRESS",
// the address the request came from as the backend saw it.
import { GUEST_PATHS } from "./guestPaths.ts";
import { awaitHttp, backendPage, linkedHost, topologyScript } from "./guestTopology.ts";

export interface RoutedTopologyOptions {
  /** How many backends (b1..bN); 1 to 50. */
  backends: number;
  /** How many load balancers (lb1..lbM); 1 to 9. */
  lbs: number;
  /**
   * Prepare the backends for tunnel mode here (default), or leave that to the node agent under
   * test ("agent": no decap device up, no VIP on `lo`, rp_filter as the kernel has it).
   */
  dsrBackends?: "prepared" | "agent";
}

export interface RoutedTopology {
  script: string;
  /** VIP for NAT-mode (masqueraded) services; local to every lb. */
  snatVip: string;
  /** VIP for tunnel-mode (DSR) services; local to every lb and on every backend's `lo`. */
  dsrVip: string;
  clientIp: string;
  /** lb namespaces and their addresses; the router starts with the VIPs on the first. */
  lbs: { ns: string; ip: string }[];
  backendIps: string[];
  backends: string[];
  port: number;
  /** A shell line pointing the router's VIP routes at lb `i` (0-based). */
  routeVipsVia(i: number): string;
}

export function routedTopology(opts: RoutedTopologyOptions): RoutedTopology {
  const { backends: n, lbs: m } = opts;
  if (!Number.isInteger(n) || n < 1 || n > 50)
    throw new Error(`routedTopology: backends must be an integer from 1 to 50 (got ${n})`);
  if (!Number.isInteger(m) || m < 1 || m > 9)
    throw new Error(`routedTopology: lbs must be an integer from 1 to 9 (got ${m})`);
  const ip = GUEST_PATHS.ip;
  const port = 80;
  const snatVip = "10.1.1.10";
  const dsrVip = "10.1.1.20";
  const clientIp = "10.0.0.2";
  const lbs = Array.from({ length: m }, (_, i) => ({ ns: `lb${i + 1}`, ip: `10.3.${11 + i}.2` }));
  const backends = Array.from({ length: n }, (_, i) => `b${i + 1}`);
  const backendIps = backends.map((_, i) => `10.3.${21 + i}.2`);
  const routeVipsVia = (i: number) =>
    [snatVip, dsrVip].map((vip) => `${ip} -n router route replace ${vip}/32 via ${lbs[i]!.ip}`).join(" && ");

  /** A host with its own link to the router (10.3.S.1 there, `address` = 10.3.S.2 here). */
  const linked = (ns: string, address: string) =>
    linkedHost("router", ns, address, address.replace(/\.2$/, ".1"));
  const lines = [
    `${ip} netns add router`,
    `${ip} -n router link set lo up`,
    `${ip} netns exec router sysctl -q -w net.ipv4.ip_forward=1`,
    ...linked("client", clientIp),
    ...lbs.flatMap((lb) => [
      ...linked(lb.ns, lb.ip),
      `${ip} netns exec ${lb.ns} sysctl -q -w net.ipv4.ip_forward=1`,
      // IPVS takes packets on INPUT, so the VIPs must be local to the lb.
      `${ip} -n ${lb.ns} route add local ${snatVip}/32 dev lo`,
      `${ip} -n ${lb.ns} route add local ${dsrVip}/32 dev lo`,
    ]),
    routeVipsVia(0),
    ...backends.flatMap((ns, i) => {
      const backendIp = backendIps[i]!;
      return [
        ...linked(ns, backendIp),
        ...(opts.dsrBackends === "agent"
          ? []
          : [
              `${ip} -n ${ns} link set tunl0 up`,
              `${ip} -n ${ns} addr add ${dsrVip}/32 dev lo`,
              `${ip} netns exec ${ns} sysctl -q -w net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.tunl0.rp_filter=0 net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2`,
            ]),
        `mkdir -p /srv/${ns}/cgi-bin`,
        `echo '${backendPage(backendIp)}' >/srv/${ns}/index.html`,
        `printf '#!/bin/sh\\necho "Content-Type: text/plain"\\necho\\nread -r line\\necho "got $line from ${backendIp}"\\n' >/srv/${ns}/cgi-bin/echo`,
        `printf '#!/bin/sh\\necho "Content-Type: text/plain"\\necho\\necho "$REMOTE_ADDR at ${backendIp}"\\n' >/srv/${ns}/cgi-bin/client`,
        `chmod 755 /srv/${ns}/cgi-bin/echo /srv/${ns}/cgi-bin/client`,
        `${ip} netns exec ${ns} httpd -p ${port} -h /srv/${ns}`,
      ];
    }),
  ];
  // From the router: the backends' own addresses, not through any lb.
  const checks = backendIps.map((b) => awaitHttp("router", `http://${b}:${port}/`));
  return {
    script: topologyScript("client, lbs and backends each linked to one router", lines, checks),
    snatVip,
    dsrVip,
    clientIp,
    lbs,
    backendIps,
    backends,
    port,
    routeVipsVia,
  };
}
