// The source-range firewall's table in a network namespace of its own, through the real nft: what it
// writes reads back as written, a restart adopts it, someone else's change is found and repaired,
// and the table goes when no service restricts its clients.
import { execFileSync } from "node:child_process";
import type { VirtualService } from "../model.ts";
import { FIREWALL_TABLE, firewallState, parseFirewallTable } from "./firewallTable.ts";
import { SourceRangeFirewall } from "./sourceRangeFirewall.ts";

const NS = `plb-fw-${process.pid}`;
const nft: [string, ...string[]] = ["ip", "netns", "exec", NS, "nft"];
beforeAll(() => execFileSync("ip", ["netns", "add", NS]));
afterAll(() => execFileSync("ip", ["netns", "delete", NS]));

const inNs = (script: string) =>
  execFileSync("ip", ["netns", "exec", NS, "bash", "-c", script], { encoding: "utf8", timeout: 10_000 });
const listed = () => inNs(`nft -j list table ip ${FIREWALL_TABLE} 2>/dev/null || true`);
const svc = (vip: string, port: number, sourceRanges?: string[]): VirtualService => ({
  vip,
  port,
  protocol: port === 53 ? "udp" : "tcp",
  scheduler: "mh",
  backends: [{ ip: "10.244.1.5", port, weight: 1 }],
  ...(sourceRanges && { sourceRanges }),
});
// Prefix-aligned, single-address and unaligned ranges: nft prints each its own way.
const web = svc("10.1.1.10", 80, [
  "10.0.0.0-10.255.255.255",
  "192.168.1.7-192.168.1.7",
  "198.18.0.2-198.18.0.9",
]);
const dns = svc("10.1.1.11", 53, []);
const open = svc("10.1.1.12", 443);

describe("SourceRangeFirewall", () => {
  it("writes the restricted services' ranges, which read back exactly, and adopts them on restart", async () => {
    const firewall = new SourceRangeFirewall(nft);
    expect(await firewall.apply([web, dns, open])).toEqual({ changes: 1, drift: [] });
    const read = parseFirewallTable(listed());
    expect(read.problem).toBeUndefined();
    expect(read.state).toEqual(firewallState([web, dns, open]));
    expect([...read.state!.keys()].sort()).toEqual(["tcp:10.1.1.10:80", "udp:10.1.1.11:53"]);
    // The same again: nothing sent; a restarted controller finds it right and sends nothing either.
    expect(await firewall.apply([web, dns, open])).toEqual({ changes: 0, drift: [] });
    expect(await new SourceRangeFirewall(nft).apply([web, dns, open])).toEqual({ changes: 0, drift: [] });
  });

  it("finds and repairs someone else's change, and reads it clean afterwards", async () => {
    const firewall = new SourceRangeFirewall(nft);
    await firewall.apply([web, dns]);
    inNs(`nft delete element ip ${FIREWALL_TABLE} restricted '{ 10.1.1.10 . tcp . 80 }'`);
    expect((await firewall.check(true)).repaired).toBe(1);
    expect(parseFirewallTable(listed()).state).toEqual(firewallState([web, dns]));
    inNs(`nft add rule ip ${FIREWALL_TABLE} prerouting accept`);
    expect(await firewall.check(true)).toMatchObject({ drift: [{ kind: "base" }], repaired: 1 });
    inNs(`nft delete table ip ${FIREWALL_TABLE}`);
    expect(await firewall.check(true)).toMatchObject({ drift: [{ kind: "missing" }], repaired: 1 });
    expect(await firewall.check(true)).toEqual({ drift: [], repaired: 0 });
  });

  it("removes the table once no service restricts its clients", async () => {
    const firewall = new SourceRangeFirewall(nft);
    await firewall.apply([web]);
    expect(await firewall.apply([open, svc("10.1.1.10", 80)])).toEqual({ changes: 1, drift: [] });
    expect(listed()).toBe("");
    expect(await firewall.check(true)).toEqual({ drift: [], repaired: 0 });
    // With nothing restricted, a cheap check does not look; a full one finds a stray table.
    inNs(`nft add table ip ${FIREWALL_TABLE}`);
    expect(await firewall.check(false)).toEqual({ drift: [], repaired: 0 });
    expect(await firewall.check(true)).toMatchObject({ drift: [{ kind: "base" }], repaired: 1 });
    expect(listed()).toBe("");
  });
});

describe("parseFirewallTable", () => {
  it("names what is not the table as written", () => {
    expect(parseFirewallTable("nope").problem).toMatch(/not JSON/);
    expect(parseFirewallTable('{"nftables":[{"table":{"name":"portable_lb_firewall"}}]}').problem).toMatch(
      /its sets are not restricted/,
    );
  });
});
