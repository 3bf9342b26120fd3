// The pod network of one node, what a bridge CNI plugin does on a real node: the node's pod bridge with
// the first address of the podCIDR as the pods' gateway, and per pod a network namespace joined to the
// bridge by a veth (`eth0` inside), with its address, loopback up and a default route via the gateway.
// The agent runs inside the node's network namespace, so the bridge and the veths' node ends are made
// right here. `ip netns` names are machine-wide, so a pod's is made from its UID.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { gatewayOf, prefixLength } from "./ipam.ts";
import { mountPointsOf } from "./mountpoints.ts";
import { CommandError, run, runOk } from "./run.ts";

export function podNetnsName(uid: string): string {
  return `plb-pod-${uid}`;
}

/** The node end of a pod's veth: unique per pod on the node, within IFNAMSIZ (15). */
export function hostVethName(uid: string): string {
  return `veth${createHash("sha256").update(uid).digest("hex").slice(0, 8)}`;
}

/** Only network sysctls are per network namespace; the rest would change the whole machine. */
export function checkSysctls(sysctls: { name: string; value: string }[]): string | undefined {
  const bad = sysctls.find((s) => !/^net\.[a-z0-9_.\-/]+$/.test(s.name));
  return bad
    ? `sysctl ${bad.name} is not namespaced by the network namespace; the lab agent allows net.* only`
    : undefined;
}

interface IpAddr {
  ifname: string;
  addr_info?: { family: string; local: string; prefixlen: number }[];
}

export class PodNetwork {
  readonly #bridge: string;
  readonly #ip: string;
  #cidr: string | undefined;

  constructor(bridge: string, ipPath: string) {
    this.#bridge = bridge;
    this.#ip = ipPath;
  }

  get gateway(): string {
    return gatewayOf(this.#cidr!);
  }

  get prefixLength(): number {
    return prefixLength(this.#cidr!);
  }

  /** Creates the bridge if missing, gives it the gateway address, brings it up, turns on forwarding. */
  async ensureBridge(podCidr: string): Promise<void> {
    this.#cidr = podCidr;
    const ip = this.#ip;
    const bridge = this.#bridge;
    const shown = await run(ip, ["-j", "address", "show", "dev", bridge]);
    if (shown.code !== 0) await runOk(ip, ["link", "add", bridge, "type", "bridge"]);
    const addrs = shown.code === 0 ? ((JSON.parse(shown.stdout) as IpAddr[])[0]?.addr_info ?? []) : [];
    const want = `${this.gateway}/${this.prefixLength}`;
    const inet = addrs.filter((a) => a.family === "inet").map((a) => `${a.local}/${a.prefixlen}`);
    // A gateway of an earlier podCIDR (the Node was deleted and registered again) goes.
    for (const stale of inet.filter((a) => a !== want))
      await runOk(ip, ["address", "del", stale, "dev", bridge]);
    if (!inet.includes(want)) await runOk(ip, ["address", "add", want, "dev", bridge]);
    await runOk(ip, ["link", "set", bridge, "up"]);
    // Pods on other nodes are reached through this node: it routes between the bridge and its uplink.
    if (readFileSync("/proc/sys/net/ipv4/ip_forward", "utf8").trim() !== "1") {
      writeFileSync("/proc/sys/net/ipv4/ip_forward", "1");
    }
  }

  /** Whether the namespace is usable from here (its bind mount exists in this mount namespace). */
  netnsMounted(netns: string): boolean {
    return mountPointsOf(readFileSync("/proc/self/mountinfo", "utf8")).includes(`/run/netns/${netns}`);
  }

  /**
   * Makes the pod's namespace, veth, address and routes (idempotent: a complete one is kept, a
   * partial one made again), then the pod's sysctls.
   */
  async setUp(
    netns: string,
    hostVeth: string,
    podIp: string,
    sysctls: { name: string; value: string }[],
  ): Promise<void> {
    const ip = this.#ip;
    if (this.netnsMounted(netns) && (await this.#complete(netns, hostVeth, podIp))) return;
    await this.tearDown(netns, hostVeth);
    await runOk(ip, ["netns", "add", netns]);
    // The pod end is created inside the pod's namespace under its final name: never a clash here.
    await runOk(ip, ["link", "add", hostVeth, "type", "veth", "peer", "name", "eth0", "netns", netns]);
    await runOk(ip, ["link", "set", hostVeth, "master", this.#bridge, "up"]);
    await runOk(ip, ["-n", netns, "link", "set", "lo", "up"]);
    await runOk(ip, ["-n", netns, "address", "add", `${podIp}/${this.prefixLength}`, "dev", "eth0"]);
    await runOk(ip, ["-n", netns, "link", "set", "eth0", "up"]);
    await runOk(ip, ["-n", netns, "route", "replace", "default", "via", this.gateway, "dev", "eth0"]);
    for (const s of sysctls) {
      await runOk(ip, ["netns", "exec", netns, "sysctl", "-qw", `${s.name}=${s.value}`]);
    }
  }

  async #complete(netns: string, hostVeth: string, podIp: string): Promise<boolean> {
    const host = await run(this.#ip, ["-j", "link", "show", "dev", hostVeth]);
    if (host.code !== 0) return false;
    const inside = await run(this.#ip, ["-n", netns, "-j", "address", "show", "dev", "eth0"]);
    if (inside.code !== 0) return false;
    const info = (JSON.parse(inside.stdout) as IpAddr[])[0]?.addr_info ?? [];
    return info.some((a) => a.family === "inet" && a.local === podIp);
  }

  /**
   * Removes the veth and the namespace, whatever of them exists. A namespace file without a mount
   * here (left by an agent that died, whose mount namespace went with it) is just removed.
   */
  async tearDown(netns: string, hostVeth: string): Promise<void> {
    const ip = this.#ip;
    if ((await run(ip, ["link", "show", "dev", hostVeth])).code === 0) {
      await runOk(ip, ["link", "delete", hostVeth]);
    }
    if (this.netnsMounted(netns)) await runOk(ip, ["netns", "delete", netns]);
    else if (existsSync(`/run/netns/${netns}`)) rmSync(`/run/netns/${netns}`, { force: true });
  }

  /**
   * Names a namespace again after an agent restart: the previous agent's mount of it went with its
   * mount namespace, but a process of the pod still holds the namespace itself.
   */
  async reattach(netns: string, pid: number): Promise<void> {
    if (this.netnsMounted(netns)) return;
    rmSync(`/run/netns/${netns}`, { force: true });
    try {
      await runOk(this.#ip, ["netns", "attach", netns, String(pid)]);
    } catch (err) {
      throw new CommandError(
        `cannot name the network namespace of pid ${pid} ${netns} again: ${(err as Error).message}`,
      );
    }
  }
}
