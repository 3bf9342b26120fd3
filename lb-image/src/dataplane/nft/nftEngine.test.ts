// The nftables engine in a network namespace of its own: it creates its table on first start,
// adopts what is there on restart (no flush, no change), and applies by diff.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualService } from "../model.ts";
import { NftEngine, TUNNEL_CHECK_MS } from "./nftEngine.ts";
import { batches, serviceChanges } from "./nftRuleset.ts";
import { toNft } from "./nftState.ts";

const NS = `plb-nfte-${process.pid}`;
const nft: [string, ...string[]] = ["ip", "netns", "exec", NS, "nft"];
const ip: [string, ...string[]] = ["ip", "netns", "exec", NS, "ip"];
beforeAll(() => {
  execFileSync("ip", ["netns", "add", NS]);
  // As in every pod (the kernel refuses an onlink gateway in a namespace whose lo is down).
  execFileSync("ip", ["-n", NS, "link", "set", "lo", "up"]);
});
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
/** Runs a shell script in the namespace, as another program than the engine would. */
const inNs = (script: string) =>
  execFileSync("ip", ["netns", "exec", NS, "bash", "-c", script], { timeout: 10_000 });
const handles = () =>
  execFileSync(
    "ip",
    ["netns", "exec", NS, "nft", "-a", "list", "chain", "ip", "portable_lb", "svc_udp_0a01010b_53"],
    { encoding: "utf8" },
  );

/** What `ip` shows of the DSR tunnels in the namespace: rules and encap routes of ours, and the device. */
const tunnels = () => {
  const show = (...args: string[]) =>
    execFileSync("ip", ["netns", "exec", NS, "ip", ...args], { encoding: "utf8" }).trim();
  return {
    // (`ip rule show` filters by protocol on newer iproute2 only.)
    rules: show("rule", "show")
      .split("\n")
      .filter((l) => l.endsWith(" proto 212"))
      .sort(), // backends' rules share a preference; their order does not matter
    routes: show("route", "show", "table", "all", "proto", "212").split("\n").filter(Boolean).sort(),
    device: show("-br", "link", "show", "type", "vxlan"),
  };
};
const dsrWeb = (backends: string[]): VirtualService => ({
  ...web([]),
  port: 8080,
  forwarding: "dsr",
  backends: backends.map((ip) => ({ ip, port: 8080, weight: 1 })),
});

describe("NftEngine", () => {
  it("routes each DSR backend's mark into its tunnel, adopts, repairs and removes the tunnels", async () => {
    const engine = new NftEngine(nft, ip);
    await engine.apply([dsrWeb(["10.244.1.5", "10.244.2.5"]), dns]);
    const made = tunnels();
    expect(made.device).toMatch(/^plb-dsr\s+UNKNOWN/);
    // Locally made packets (the encapsulated ones) skip the backends' rules, which come before the
    // local table, moved from 0 (the pod's VIPs may be local addresses).
    expect(made.rules).toEqual([
      "100:\tfrom all ipproto udp dport 4789 goto 32000 proto 212",
      "101:\tfrom all fwmark 0xaf40105 lookup 183763205 proto 212",
      "101:\tfrom all fwmark 0xaf40205 lookup 183763461 proto 212",
      "32000:\tfrom all lookup local proto 212",
    ]);
    expect(inNs("ip rule show pref 0").toString()).toBe("");
    expect(made.routes).toEqual([
      expect.stringMatching(
        /^default +encap ip id 7367778 .*dst 10\.244\.1\.5 .*via 169\.254\.255\.1 dev plb-dsr table 183763205 onlink/,
      ),
      expect.stringMatching(
        /^default +encap ip id 7367778 .*dst 10\.244\.2\.5 .*via 169\.254\.255\.1 dev plb-dsr table 183763461 onlink/,
      ),
    ]);
    // A restart adopts them: nothing to change.
    const restarted = new NftEngine(nft, ip);
    expect(await restarted.apply([dsrWeb(["10.244.1.5", "10.244.2.5"]), dns])).toMatchObject({ changes: 0 });
    expect(tunnels()).toEqual(made);
    // Someone deletes a backend's rule, or the device with all its routes: the scheduled check (a
    // read beside the writer, then the repair in it) puts them back.
    inNs("ip rule del pref 101 fwmark 0xaf40105 lookup 183763205");
    const report = await restarted.repair(await restarted.inspect("full"));
    expect(report.drift).toEqual([expect.objectContaining({ kind: "route" })]);
    expect(tunnels()).toEqual(made);
    inNs("ip link del plb-dsr");
    expect(tunnels().routes).toEqual([]);
    // Cheap checks read the tunnels at most every TUNNEL_CHECK_MS.
    await new Promise((r) => setTimeout(r, TUNNEL_CHECK_MS));
    const cheap = await restarted.repair(await restarted.inspect("quick"));
    expect(cheap.drift.length).toBeGreaterThan(0);
    expect(tunnels()).toEqual(made);
    // One backend leaves: its tunnel goes; the service turns to SNAT: all of them go.
    await restarted.apply([dsrWeb(["10.244.2.5"]), dns]);
    expect(tunnels().rules).toHaveLength(3);
    await restarted.apply([{ ...dsrWeb(["10.244.2.5"]), forwarding: "snat" }, dns]);
    expect(tunnels()).toEqual({ rules: [], routes: [], device: "" });
    expect(inNs("ip rule show pref 0").toString()).toBe("0:\tfrom all lookup local\n");
    inNs("nft delete table ip portable_lb"); // the next case starts from none
    // Some 40 ip and nft commands and a wait of TUNNEL_CHECK_MS: past Jest's 5 s on a loaded machine
    // (CI's two workers), which left the table behind for the next case.
  }, 30_000);

  it("creates its table, adopts it after a restart without touching it, and changes only what changed", async () => {
    const first = new NftEngine(nft, ip);
    // First start: the table is missing, so it is made whole with the services (22 statements of
    // frame, 3 per service) in one transaction.
    expect(await first.apply([web(["10.244.1.5", "10.244.2.5"]), dns])).toMatchObject({
      changes: 28,
      drift: [expect.objectContaining({ kind: "missing" })],
    });
    const dnsRule = handles();

    // A restarted controller: same desired state, nothing to do, rules untouched.
    const restarted = new NftEngine(nft, ip);
    expect(await restarted.apply([web(["10.244.1.5", "10.244.2.5"]), dns])).toMatchObject({
      changes: 0,
      drift: [],
    });
    expect(await restarted.services()).toBe(2);

    // One backend leaves: only the web service's rule is swapped; the dns rule keeps its handle.
    expect(await restarted.apply([web(["10.244.1.5"]), dns])).toMatchObject({ changes: 2, drift: [] });
    expect(handles()).toBe(dnsRule);
    expect(await restarted.apply([dns])).toMatchObject({ changes: 3, drift: [] });
    expect(await new NftEngine(nft, ip).services()).toBe(1);
  });

  it("recovers after a failed apply by reading the kernel again", async () => {
    const engine = new NftEngine(nft, ip);
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
    expect(await engine.apply([dns])).toMatchObject({ changes: 3, drift: [] });
    expect(await engine.apply([dns])).toMatchObject({ changes: 0, drift: [] });
  });

  it.each([
    // [fault, shell commands, the verification that finds it]
    ["a flushed table", "nft flush table ip portable_lb", "quick"],
    ["a deleted table", "nft delete table ip portable_lb", "quick"],
    ["a deleted masquerade rule", "nft flush chain ip portable_lb postrouting", "quick"],
    ["a service chain's rule deleted", "nft flush chain ip portable_lb svc_udp_0a01010b_53", "quick"],
    ["a foreign chain", "nft add chain ip portable_lb mine", "quick"],
    [
      "a foreign map element",
      "nft add element ip portable_lb services '{ 10.9.9.9 . tcp . 22 : accept }'",
      "quick",
    ],
    ["a changed policy", "nft add chain ip portable_lb prerouting '{ policy drop ; }'", "quick"],
    [
      "a foreign rule in a base chain",
      "nft insert rule ip portable_lb prerouting tcp dport 80 accept",
      "full",
    ],
    [
      "a foreign rule in a service chain",
      "nft insert rule ip portable_lb svc_tcp_0a01010a_80 accept",
      "full",
    ],
    ["a foreign set", "nft add set ip portable_lb mine '{ type ipv4_addr ; }'", "full"],
  ] as const)("verify() finds and repairs %s, and reads the repair back", async (_fault, command, finds) => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    const engine = new NftEngine(nft, ip);
    const desired = [web(["10.244.1.5", "10.244.2.5"]), dns];
    await engine.apply(desired);
    expect((await engine.verify("full")).drift).toEqual([]);
    expect([...engine.verified()].sort()).toEqual(["tcp:10.1.1.10:80", "udp:10.1.1.11:53"]);
    inNs(command);

    const quick = await engine.verify("quick");
    expect(quick.drift.length > 0).toBe(finds === "quick");
    const report = finds === "quick" ? quick : await engine.verify("full");
    expect(report).toMatchObject({ full: true, repaired: expect.any(Number) });
    expect(report.drift.length).toBeGreaterThan(0);
    expect(report.repaired).toBeGreaterThan(0);
    expect([...engine.verified()].sort()).toEqual(["tcp:10.1.1.10:80", "udp:10.1.1.11:53"]);
    // A fresh engine reads exactly the applied state back, with nothing else in the table.
    const fresh = new NftEngine(nft, ip);
    expect(await fresh.apply(desired)).toMatchObject({ changes: 0, drift: [] });
    expect(await engine.verify("quick")).toMatchObject({ drift: [], full: false });
  });

  it("after an apply, verify('changed') reads back what changed and the frame, and repairs them", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    const engine = new NftEngine(nft, ip);
    await engine.apply([dns]);
    expect(await engine.verify("full")).toMatchObject({ drift: [] });
    await engine.apply([dns, web(["10.244.1.5"])]);
    expect([...engine.verified()]).toEqual(["udp:10.1.1.11:53"]);
    // The new service is gone before it is read back: the check sees it, and the repair restores it.
    inNs(
      "nft delete element ip portable_lb services '{ 10.1.1.10 . tcp . 80 }'; nft delete chain ip portable_lb svc_tcp_0a01010a_80",
    );
    const report = await engine.verify("changed");
    expect(report).toMatchObject({ full: true, repaired: 3 });
    expect([...engine.verified()].sort()).toEqual(["tcp:10.1.1.10:80", "udp:10.1.1.11:53"]);
    // Nothing wrong: the check alone, no full read.
    await engine.apply([dns, web(["10.244.1.5", "10.244.2.5"])]);
    expect(await engine.verify("changed")).toMatchObject({ drift: [], full: false });
    // The frame is part of every check: a flushed masquerade chain is found after any change.
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "chain", "ip", "portable_lb", "postrouting"]);
    await engine.apply([dns, web(["10.244.2.5"])]);
    expect(await engine.verify("changed")).toMatchObject({ full: true, rebuilt: true });
  });

  it("judges a read made beside applies fairly: what was written after it began is not drift", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    const engine = new NftEngine(nft, ip);
    await engine.apply([web(["10.244.1.5"]), dns]);
    const before = await engine.inspect("full");
    await engine.apply([web(["10.244.1.5", "10.244.2.5"])]);
    expect(await engine.repair(before)).toMatchObject({ drift: [], repaired: 0 });
    // A read of a broken table, judged after a repair rebuilt it, repairs nothing more.
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "table", "ip", "portable_lb"]);
    const broken = await engine.inspect("full");
    expect(broken.drift.length).toBeGreaterThan(0);
    expect((await engine.verify("full")).rebuilt).toBe(true);
    expect(await engine.repair(broken)).toMatchObject({ drift: [], repaired: 0 });
    expect(await new NftEngine(nft, ip).apply([web(["10.244.1.5", "10.244.2.5"])])).toMatchObject({
      changes: 0,
      drift: [],
    });
  });

  it("watches its table with nft monitor: someone else's change is reported at once, its own writes are not", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    const engine = new NftEngine(nft, ip);
    await engine.apply([dns]);
    let reports = 0;
    engine.watch(() => reports++);
    try {
      const settle = () => new Promise((r) => setTimeout(r, 500));
      // The monitor's start counts as one: changes before it may have gone unseen.
      const started = Date.now() + 5_000;
      while (reports === 0 && Date.now() < started) await new Promise((r) => setTimeout(r, 20));
      await settle();
      expect(reports).toBe(1);
      // Its own writes, the source-range firewall's among them, are not reported.
      await engine.apply([dns, { ...web(["10.244.1.5"]), sourceRanges: ["10.0.0.0-10.255.255.255"] }]);
      await settle();
      expect(reports).toBe(1);
      const reported = async (n: number) => {
        const deadline = Date.now() + 2_000;
        while (reports < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        expect(reports).toBe(n);
      };
      execFileSync("ip", ["netns", "exec", NS, "nft", "add", "chain", "ip", "portable_lb", "mine"]);
      await reported(2);
      // The firewall's table is watched too: someone emptying it is reported, and a full read repairs it.
      inNs("nft flush set ip portable_lb_firewall allowed");
      await reported(3);
      expect((await engine.verify("full")).drift.map((d) => d.detail)).toContain(
        "nft table portable_lb_firewall: the services or source ranges it holds differ from what was applied",
      );
      // A change to another table is not ours to judge.
      execFileSync("ip", ["netns", "exec", NS, "nft", "add", "table", "ip", "other"]);
      await settle();
      expect(reports).toBe(3);
    } finally {
      engine.unwatch();
    }
  });

  it("while its monitor watches, reads the table back on schedule only as a slower safety net", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    // nft behind a wrapper that counts its runs.
    const dir = mkdtempSync(join(tmpdir(), "nft-calls-"));
    const calls = join(dir, "calls");
    const counted: [string, ...string[]] = ["sh", "-c", `echo >>"$0"; exec ${nft.join(" ")} "$@"`, calls];
    const runs = () => readFileSync(calls, "utf8").length;
    const engine = new NftEngine(counted, ip);
    /** The nft runs of one cheap check (its repair included), and how many drifts it found. */
    const cheapCheck = async () => {
      const before = runs();
      const { drift } = await engine.repair(await engine.inspect("quick"));
      return drift.length === 0 ? runs() - before : `${runs() - before} runs, drift`;
    };
    try {
      await engine.apply([dns]);
      await engine.verify("full");
      // Unwatched, every cheap check looks at the table, and a full read may follow at once.
      expect(await cheapCheck()).toBeGreaterThan(0);
      expect(engine.fullReadAffordable()).toBe(true);
      engine.watch(() => undefined);
      const started = Date.now() + 5_000;
      const withMonitor = runs() + 1;
      while (runs() < withMonitor && Date.now() < started) await new Promise((r) => setTimeout(r, 20));
      await engine.verify("full");
      // Watched: no nft run for the next cheap checks, and no full read due, until the safety net's time.
      expect([await cheapCheck(), await cheapCheck()]).toEqual([0, 0]);
      expect(engine.fullReadAffordable()).toBe(false);
      // A read that finds drift (here left unrepaired) ends the rest: the next check looks again.
      inNs("nft add chain ip portable_lb mine");
      expect((await engine.inspect("full")).drift).not.toEqual([]);
      expect(await cheapCheck()).toMatch(/^[1-9]\d* runs, drift$/);
      // Its repair ended on a clean read: the checks rest on that one again.
      expect(await cheapCheck()).toBe(0);
      engine.unwatch();
      expect(await cheapCheck()).toBeGreaterThan(0);
      expect(engine.fullReadAffordable()).toBe(true);
    } finally {
      engine.unwatch();
      rmSync(dir, { recursive: true });
    }
    // A hang guard: the monitor's start alone may take seconds on two busy cores.
  }, 30_000);

  it("replaces a table it cannot make sense of at start, in one transaction", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    await new NftEngine(nft, ip).apply([web(["10.244.1.5"]), dns]);
    // What the issue found after a restart: an element that goes to no service chain with a rule.
    inNs(
      "nft flush table ip portable_lb; nft delete element ip portable_lb services '{ 10.1.1.10 . tcp . 80 }'; " +
        "nft add chain ip portable_lb other; nft add element ip portable_lb services '{ 10.1.1.10 . tcp . 80 : goto other }'",
    );
    const restarted = new NftEngine(nft, ip);
    const applied = await restarted.apply([web(["10.244.1.5"]), dns]);
    expect(applied.drift.map((d) => d.kind)).toContain("foreign");
    expect(await new NftEngine(nft, ip).apply([web(["10.244.1.5"]), dns])).toMatchObject({
      changes: 0,
      drift: [],
    });
    expect(await restarted.verify("quick")).toMatchObject({ drift: [] });
  });

  it("counts each new connection to a service in the dispatch map's element counter, across backend changes", async () => {
    execFileSync("ip", ["netns", "exec", NS, "nft", "flush", "ruleset"]);
    const engine = new NftEngine(nft, ip);
    await engine.apply([web(["10.244.1.5"]), dns]);
    // Connections made inside the namespace take the output hook; whether they complete does not
    // matter: the counter counts the first packet of each. Both backends are local and nothing
    // listens, so each ends at once on a reset; the timeout only bounds it (a short one killed bash
    // before its SYN on a loaded machine).
    inNs(
      "ip link set lo up; ip addr add 10.244.1.5/32 dev lo; ip addr add 10.244.2.5/32 dev lo; ip route replace local 10.1.1.10/32 dev lo",
    );
    const connect = (n: number) =>
      inNs(
        `for i in $(seq ${n}); do timeout 5 bash -c 'exec 3<>/dev/tcp/10.1.1.10/80' 2>/dev/null; done; true`,
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
    const engine = new NftEngine(nft, ip);
    expect(await engine.apply(many(450, "10.244.1.5"))).toMatchObject({ changes: 22 + 450 * 3 });
    expect(await engine.services()).toBe(450);
    const restarted = new NftEngine(nft, ip);
    expect(await restarted.apply(many(450, "10.244.1.5"))).toMatchObject({ changes: 0, drift: [] });
    expect(await restarted.apply(many(450, "10.244.1.6"))).toMatchObject({ changes: 450 * 2, drift: [] });
    expect(await new NftEngine(nft, ip).apply(many(450, "10.244.1.6"))).toMatchObject({
      changes: 0,
      drift: [],
    });
    // Real nft round trips of 450 services: about a second idle, but tens of seconds on two busy
    // cores; the timeout only guards against a hang (speed is bench:reconcile's to measure).
  }, 120_000);
});
