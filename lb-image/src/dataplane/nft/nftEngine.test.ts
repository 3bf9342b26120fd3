// The nftables engine in a network namespace of its own: it creates its table on first start,
// adopts what is there on restart (no flush, no change), and applies by diff.
import { execFileSync } from "node:child_process";
import type { VirtualService } from "../model.ts";
import { NftEngine } from "./nftEngine.ts";
import { batches, serviceChanges } from "./nftRuleset.ts";
import { toNft } from "./nftState.ts";

const NS = `plb-nfte-${process.pid}`;
const nft: [string, ...string[]] = ["ip", "netns", "exec", NS, "nft"];
beforeAll(() => execFileSync("ip", ["netns", "add", NS]));
afterAll(() => execFileSync("ip", ["netns", "delete", NS]));

const web = (backends: string[]): VirtualService => ({
  vip: "10.1.1.10",
  port: 80,
  protocol: "tcp",
  scheduler: "mh",
  backends: backends.map((ip) => ({ ip, port: 8080, weight: 1 })),
});
const dns: VirtualService = {
  vip: "10.1.1.11",
  port: 53,
  protocol: "udp",
  scheduler: "mh",
  backends: [{ ip: "10.244.1.9", port: 53, weight: 1 }],
};
const handles = () =>
  execFileSync(
    "ip",
    ["netns", "exec", NS, "nft", "-a", "list", "chain", "ip", "portable_lb", "svc_udp_0a01010b_53"],
    { encoding: "utf8" },
  );

describe("NftEngine", () => {
  it("creates its table, adopts it after a restart without touching it, and changes only what changed", async () => {
    const first = new NftEngine(nft);
    expect(await first.apply([web(["10.244.1.5", "10.244.2.5"]), dns])).toEqual({ changes: 6 });
    const dnsRule = handles();

    // A restarted controller: same desired state, nothing to do, rules untouched.
    const restarted = new NftEngine(nft);
    expect(await restarted.apply([web(["10.244.1.5", "10.244.2.5"]), dns])).toEqual({ changes: 0 });
    expect(await restarted.services()).toBe(2);

    // One backend leaves: only the web service's rule is swapped; the dns rule keeps its handle.
    expect(await restarted.apply([web(["10.244.1.5"]), dns])).toEqual({ changes: 2 });
    expect(handles()).toBe(dnsRule);
    expect(await restarted.apply([dns])).toEqual({ changes: 3 });
    expect(await new NftEngine(nft).services()).toBe(1);
  });

  it("recovers after a failed apply by reading the kernel again", async () => {
    const engine = new NftEngine(nft);
    await engine.apply([dns]);
    // Someone removes the service's chain behind our back: the next diff is wrong and fails...
    execFileSync("ip", [
      "netns",
      "exec",
      NS,
      "nft",
      "delete",
      "element",
      "ip",
      "portable_lb",
      "services",
      "{ 10.1.1.11 . udp . 53 }",
    ]);
    execFileSync("ip", [
      "netns",
      "exec",
      NS,
      "nft",
      "flush",
      "chain",
      "ip",
      "portable_lb",
      "svc_udp_0a01010b_53",
    ]);
    execFileSync("ip", [
      "netns",
      "exec",
      NS,
      "nft",
      "delete",
      "chain",
      "ip",
      "portable_lb",
      "svc_udp_0a01010b_53",
    ]);
    await expect(engine.apply([])).rejects.toThrow(/nft .* failed/);
    // ...and the one after that reads the kernel and converges.
    expect(await engine.apply([dns])).toEqual({ changes: 3 });
    expect(await engine.apply([dns])).toEqual({ changes: 0 });
  });

  it("counts each new connection to a service in the dispatch map's element counter, across backend changes", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    const engine = new NftEngine(nft);
    await engine.apply([web(["10.244.1.5"]), dns]);
    // Connections made inside the namespace take the output hook; whether they complete does not
    // matter: the counter counts the first packet of each.
    const sh = (script: string) =>
      execFileSync("ip", ["netns", "exec", NS, "bash", "-c", script], { timeout: 10_000 });
    sh("ip link set lo up; ip addr add 10.244.1.5/32 dev lo; ip route replace local 10.1.1.10/32 dev lo");
    const connect = (n: number) =>
      sh(
        `for i in $(seq ${n}); do timeout 0.3 bash -c 'exec 3<>/dev/tcp/10.1.1.10/80' 2>/dev/null; done; true`,
      );
    connect(5);
    const byKey = async () =>
      Object.fromEntries(
        (await engine.counters()).map((c) => [`${c.protocol}/${c.vip}:${c.port}`, c.connections]),
      );
    expect(await byKey()).toEqual({ "tcp/10.1.1.10:80": 5, "udp/10.1.1.11:53": 0 });
    await engine.apply([web(["10.244.1.5", "10.244.2.5"]), dns]);
    connect(2);
    expect(await byKey()).toEqual({ "tcp/10.1.1.10:80": 7, "udp/10.1.1.11:53": 0 });
    await engine.apply([dns]);
    expect(await byKey()).toEqual({ "udp/10.1.1.11:53": 0 });
  });

  it("splits a change of thousands of services into transactions of whole services", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    const many = (n: number, backend: string): VirtualService[] =>
      Array.from({ length: n }, (_, i) => ({
        ...web([backend]),
        vip: `10.1.${Math.floor(i / 250)}.${(i % 250) + 1}`,
      }));
    const scripts = [...batches(serviceChanges([], toNft(many(450, "10.244.1.5"))))];
    expect(scripts.map((b) => b.match(/^add chain /gm)?.length)).toEqual([200, 200, 50]);
    const engine = new NftEngine(nft);
    expect(await engine.apply(many(450, "10.244.1.5"))).toEqual({ changes: 450 * 3 });
    expect(await engine.services()).toBe(450);
    const restarted = new NftEngine(nft);
    expect(await restarted.apply(many(450, "10.244.1.5"))).toEqual({ changes: 0 });
    expect(await restarted.apply(many(450, "10.244.1.6"))).toEqual({ changes: 450 * 2 });
    expect(await new NftEngine(nft).apply(many(450, "10.244.1.6"))).toEqual({ changes: 0 });
    // Four real nft round trips of 450 services: about a second idle, several under CI's load.
  }, 30_000);
});
