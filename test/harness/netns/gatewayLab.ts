// The topology most data-plane tests need: a client namespace, a forwarding gateway namespace (an LB
// pod, or a node), and hosts on a bridge behind the gateway, each answering HTTP with its own name.
//   client (.2) ── (.1) gateway ══ bridge ══ host, host, …
import { httpHistogram, startHttpEcho } from "./httpClient.ts";
import { addressOf, type LabNamespace, type LabProcess, NetnsLab } from "@portable-lb/lab";

export interface GatewayLabOptions {
  gateway: string;
  /** The client link, e.g. "10.10.0": client .2, gateway .1 (/24). */
  clientNet: string;
  /** The bridge in the gateway and its address, e.g. { name: "pods", address: "10.244.0.1/24" }. */
  bridge: { name: string; address: string };
  hosts: { name: string; ip: string }[];
  /** Per host, before its echo server starts (e.g. accept a VIP locally). */
  setUpHost?: (ns: LabNamespace) => Promise<void>;
  echoPort?: number;
}

export interface GatewayLab {
  lab: NetnsLab;
  client: LabNamespace;
  gateway: LabNamespace;
  hosts: Map<string, LabNamespace>;
  /** Each host's HTTP echo server (a test may stop one to make its host fail). */
  echoes: Map<string, LabProcess>;
}

export async function gatewayLab(labName: string, o: GatewayLabOptions): Promise<GatewayLab> {
  const lab = await NetnsLab.create(labName);
  const client = await lab.namespace("client");
  const gateway = await lab.namespace(o.gateway, { forwarding: true });
  await lab.link(client, gateway, { a: `${o.clientNet}.2/24`, b: `${o.clientNet}.1/24` });
  await client.defaultRoute(`${o.clientNet}.1`);
  const bridge = await lab.bridge(gateway, o.bridge.name, o.bridge.address);
  const prefixLength = o.bridge.address.split("/")[1];
  const hosts = new Map<string, LabNamespace>();
  const echoes = new Map<string, LabProcess>();
  for (const h of o.hosts) {
    const ns = await lab.namespace(h.name);
    await lab.attach(bridge, ns, `${h.ip}/${prefixLength}`, "eth0");
    await ns.defaultRoute(addressOf(o.bridge.address));
    await o.setUpHost?.(ns);
    echoes.set(h.name, await startHttpEcho(ns, { port: o.echoPort ?? 8080, name: h.name }));
    hosts.set(h.name, ns);
  }
  return { lab, client, gateway, hosts, echoes };
}

/** Which host answers each of `count` new connections from `ns` to `url`. */
export async function spreadOver(
  ns: LabNamespace,
  url: string,
  count = 60,
): Promise<{ counts: Record<string, number>; failures: number }> {
  const h = await httpHistogram(ns, url, { count, by: "name", requestTimeoutMs: 2_000 });
  return { counts: h.counts, failures: h.failures };
}
