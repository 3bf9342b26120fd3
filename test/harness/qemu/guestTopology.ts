// The usual IPVS test network inside the guest, as a shell snippet: a client, a load balancer and
// N web backends, each in its own network namespace, laid out for IPVS NAT (masquerading) mode:
//
//   client (10.0.0.2) ── lb (10.0.0.1; VIP local; 10.2.i.1) ── bi (10.2.i.2, httpd on :80)
//
// Each backend has its own link to the lb and routes everything back through it, so replies pass
// IPVS on their way out and get the VIP as source again. Each page names its backend's address, as
// in the paper's tests, so a client can tell who answered.
import { GUEST_PATHS } from "./guestPaths.ts";

export interface GuestTopologyOptions {
  /** How many backends (namespaces b1..bN); 1 to 250. */
  backends: number;
  /** The backends' HTTP port; default 80. */
  port?: number;
}

export interface GuestTopology {
  /** Shell lines for the test script; any failing step exits the script with code 90. */
  script: string;
  /** The virtual IP, local to the lb namespace; virtual services go on it. */
  vip: string;
  clientIp: string;
  /** Backend addresses, b1 first; backend i's page is `backendPage(ip)`. */
  backendIps: string[];
  port: number;
  namespaces: { client: string; lb: string; backends: string[] };
}

export const TOPOLOGY_EXIT_CODE = 90;

/** The text of the page a backend at `ip` serves. */
export function backendPage(ip: string): string {
  return `served by ${ip}`;
}

export function guestTopology(opts: GuestTopologyOptions): GuestTopology {
  const { backends } = opts;
  const port = opts.port ?? 80;
  if (!Number.isInteger(backends) || backends < 1 || backends > 250)
    throw new Error(`guestTopology: backends must be an integer from 1 to 250 (got ${backends})`);
  const ip = GUEST_PATHS.ip;
  const vip = "10.1.1.10";
  const clientIp = "10.0.0.2";
  const names = Array.from({ length: backends }, (_, i) => `b${i + 1}`);
  const backendIps = names.map((_, i) => `10.2.${i + 1}.2`);

  const lines: string[] = [
    `${ip} netns add client`,
    `${ip} netns add lb`,
    `${ip} link add cl type veth peer name eth0 netns client`,
    `${ip} link set cl netns lb`,
    `${ip} -n lb addr add 10.0.0.1/24 dev cl`,
    `${ip} -n client addr add ${clientIp}/24 dev eth0`,
    `${ip} -n lb link set lo up`,
    `${ip} -n lb link set cl up`,
    `${ip} -n client link set lo up`,
    `${ip} -n client link set eth0 up`,
    `${ip} -n client route add default via 10.0.0.1`,
    // IPVS takes packets on INPUT, so the VIP must be local to the lb namespace.
    `${ip} -n lb route add local ${vip}/32 dev lo`,
    `${ip} netns exec lb sysctl -q -w net.ipv4.ip_forward=1`,
  ];
  names.forEach((ns, i) => {
    const backendIp = backendIps[i] ?? "";
    const gateway = `10.2.${i + 1}.1`;
    lines.push(
      ...linkedHost("lb", ns, backendIp, gateway),
      `mkdir -p /srv/${ns}`,
      `echo '${backendPage(backendIp)}' >/srv/${ns}/index.html`,
      `${ip} netns exec ${ns} httpd -p ${port} -h /srv/${ns}`,
    );
  });
  const checks = backendIps.map((backendIp) => awaitHttp("lb", `http://${backendIp}:${port}/`));
  const script = topologyScript("client, lb and backends in network namespaces", lines, checks);
  return {
    script,
    vip,
    clientIp,
    backendIps,
    port,
    namespaces: { client: "client", lb: "lb", backends: names },
  };
}

/**
 * Namespace `ns` with its own veth link to namespace `hub`: `address`/24 on its eth0, `gateway`/24
 * on the hub's end (named `ns`), and its default route through the hub.
 */
export function linkedHost(hub: string, ns: string, address: string, gateway: string): string[] {
  const ip = GUEST_PATHS.ip;
  return [
    `${ip} netns add ${ns}`,
    `${ip} link add ${ns} type veth peer name eth0 netns ${ns}`,
    `${ip} link set ${ns} netns ${hub}`,
    `${ip} -n ${hub} addr add ${gateway}/24 dev ${ns}`,
    `${ip} -n ${hub} link set ${ns} up`,
    `${ip} -n ${ns} addr add ${address}/24 dev eth0`,
    `${ip} -n ${ns} link set lo up`,
    `${ip} -n ${ns} link set eth0 up`,
    `${ip} -n ${ns} route add default via ${gateway}`,
  ];
}

/**
 * A topology's shell: each line exits the script with TOPOLOGY_EXIT_CODE when it fails, naming it;
 * then the checks.
 */
export function topologyScript(title: string, lines: string[], checks: string[]): string {
  return [
    `# guestTopology: ${title}`,
    ...lines.map(
      (line) =>
        `${line} || { echo ${shellQuote(`guestTopology: failed: ${line}`)} >&2; exit ${TOPOLOGY_EXIT_CODE}; }`,
    ),
    ...checks,
    "",
  ].join("\n");
}

/** Waits (10 s at most) until `url` answers from namespace `ns`: httpd forks into the background. */
export function awaitHttp(ns: string, url: string): string {
  return (
    `plb_i=0; until ${GUEST_PATHS.ip} netns exec ${ns} timeout 5 wget -q -O /dev/null ${url}; do ` +
    `plb_i=$((plb_i + 1)); [ $plb_i -lt 50 ] || { echo "guestTopology: ${url} never answered from ${ns}" >&2; exit ${TOPOLOGY_EXIT_CODE}; }; sleep 0.2; done`
  );
}

/** `text` as one word for the guest's shell. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'"'"'`)}'`;
}
