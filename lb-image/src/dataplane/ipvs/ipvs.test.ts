import fc from "fast-check";
import { backendKey, serviceKey } from "../model.ts";
import { arbitraryState } from "../testing/arbitraries.ts";
import { ipvsDiff } from "./ipvsDiff.ts";
import { formatSave, parseCommand, parseSave } from "./ipvsadmSave.ts";
import { parseStats } from "./ipvsadmStats.ts";
import { sortIpvs, toIpvs, type IpvsService } from "./ipvsState.ts";
import { simulate, simulateKernel } from "./testing/ipvsSimulator.ts";

// What another tool (or an older version of ours) may have left: other schedulers, flags, methods.
const arbitraryForeign: fc.Arbitrary<IpvsService[]> = arbitraryState.chain((state) =>
  fc
    .tuple(
      fc.constantFrom("wlc", "sh", "rr"),
      fc.constantFrom<string[]>([], ["sh-port"]),
      fc.constantFrom("masq" as const, "gate" as const),
    )
    .map(([scheduler, flags, method]) =>
      toIpvs(state).map((s, i) =>
        i % 2
          ? { ...s, scheduler, flags, servers: s.servers.map((r) => ({ ...r, method })) }
          : // An mh service whose servers were added in another order (by hand, or an older version).
            { ...s, inOrder: s.scheduler !== "mh" || s.servers.length < 2 },
      ),
    ),
);

describe("IPVS engine (pure)", () => {
  it("applying diff(current, desired) to current gives desired", () => {
    fc.assert(
      fc.property(arbitraryForeign, arbitraryState, (current, desired) => {
        const want = toIpvs(desired);
        expect(simulate(current, ipvsDiff(current, want))).toEqual(want);
      }),
      { numRuns: 300 },
    );
  });

  it("a second diff is empty (applying is idempotent)", () => {
    fc.assert(
      fc.property(arbitraryForeign, arbitraryState, (current, desired) => {
        const want = toIpvs(desired);
        const after = simulate(current, ipvsDiff(current, want));
        expect(ipvsDiff(after, want)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it("never deletes a service that stays, so its established connections survive", () => {
    fc.assert(
      fc.property(arbitraryForeign, arbitraryState, (current, desired) => {
        const kept = new Set(desired.map(serviceKey));
        for (const cmd of ipvsDiff(current, toIpvs(desired)).filter((c) => c.startsWith("-D "))) {
          expect(kept.has(serviceKey(parseCommand(cmd).service))).toBe(false);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("leaves mh servers in one kernel order whatever the history, so every LB builds one table", () => {
    // ip_vs_mh fills its table walking the kernel's server list: two LBs with the same servers
    // but different histories of adds and deletes must still list them alike.
    const kernelOrder = (kernel: IpvsService[]) =>
      kernel.filter((s) => s.scheduler === "mh").map((s) => [serviceKey(s), s.servers.map(backendKey)]);
    fc.assert(
      fc.property(fc.array(arbitraryState, { minLength: 1, maxLength: 5 }), (history) => {
        let kernel: IpvsService[] = [];
        let state: IpvsService[] = [];
        for (const step of history) {
          const want = toIpvs(step);
          kernel = simulateKernel(kernel, ipvsDiff(state, want));
          state = want;
        }
        const fresh = simulateKernel([], ipvsDiff([], state));
        expect(kernelOrder(kernel).sort()).toEqual(kernelOrder(fresh).sort());
      }),
      { numRuns: 300 },
    );
  });

  it("re-adds in order only the mh servers behind a new one, in the same batch", () => {
    const mh = (ips: string[]) =>
      toIpvs([
        {
          vip: "10.1.1.10",
          port: 80,
          protocol: "tcp",
          scheduler: "mh",
          backends: ips.map((ip) => ({ ip, port: 80, weight: 1 })),
        },
      ]);
    expect(
      ipvsDiff(
        mh(["10.0.0.1", "10.0.0.3", "10.0.0.4"]),
        mh(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]),
      ),
    ).toEqual([
      "-d -t 10.1.1.10:80 -r 10.0.0.3:80",
      "-d -t 10.1.1.10:80 -r 10.0.0.4:80",
      "-a -t 10.1.1.10:80 -r 10.0.0.2:80 -m -w 1",
      "-a -t 10.1.1.10:80 -r 10.0.0.3:80 -m -w 1",
      "-a -t 10.1.1.10:80 -r 10.0.0.4:80 -m -w 1",
    ]);
    // Removing keeps the rest in order; adding at the end re-adds nothing.
    expect(ipvsDiff(mh(["10.0.0.1", "10.0.0.2"]), mh(["10.0.0.2"]))).toEqual([
      "-d -t 10.1.1.10:80 -r 10.0.0.1:80",
    ]);
    expect(ipvsDiff(mh(["10.0.0.1"]), mh(["10.0.0.1", "10.0.0.2"]))).toEqual([
      "-a -t 10.1.1.10:80 -r 10.0.0.2:80 -m -w 1",
    ]);
  });

  it("parses what it formats (the -S text round-trips)", () => {
    fc.assert(
      fc.property(arbitraryForeign, (state) => {
        // The kernel's server order is not in the text (ipvsProc.ts reads it).
        expect(parseSave(formatSave(state))).toEqual(sortIpvs(state).map((s) => ({ ...s, inOrder: true })));
      }),
      { numRuns: 200 },
    );
  });

  it("writes Maglev with mh-port and mh-fallback, NAT toward backends, drain as weight 0", () => {
    const batch = ipvsDiff(
      [],
      toIpvs([
        {
          vip: "10.1.1.10",
          port: 80,
          protocol: "tcp",
          scheduler: "mh",
          backends: [
            { ip: "10.244.1.5", port: 8080, weight: 1 },
            { ip: "10.244.2.7", port: 8080, weight: 0 },
          ],
        },
      ]),
    );
    expect(batch).toEqual([
      "-A -t 10.1.1.10:80 -s mh -b mh-fallback,mh-port",
      "-a -t 10.1.1.10:80 -r 10.244.1.5:8080 -m -w 1",
      "-a -t 10.1.1.10:80 -r 10.244.2.7:8080 -m -w 0",
    ]);
  });

  it("hashes a ClientIP service on the client's address alone (no mh-port), and edits it in place", () => {
    const web = (affinity?: "clientIP") =>
      toIpvs([
        {
          vip: "10.1.1.10",
          port: 80,
          protocol: "tcp",
          scheduler: "mh",
          backends: [{ ip: "10.244.1.5", port: 8080, weight: 1 }],
          ...(affinity && { affinity }),
        },
      ]);
    expect(ipvsDiff([], web("clientIP"))).toEqual([
      "-A -t 10.1.1.10:80 -s mh -b mh-fallback",
      "-a -t 10.1.1.10:80 -r 10.244.1.5:8080 -m -w 1",
    ]);
    expect(ipvsDiff(web(), web("clientIP"))).toEqual(["-E -t 10.1.1.10:80 -s mh -b mh-fallback"]);
    expect(ipvsDiff(web("clientIP"), web())).toEqual(["-E -t 10.1.1.10:80 -s mh -b mh-fallback,mh-port"]);
  });

  it("tunnels DSR services in IPIP (-i), and moves a service between NAT and tunnel mode in place", () => {
    const web = (forwarding: "snat" | "dsr") =>
      toIpvs([
        {
          vip: "10.1.1.1",
          port: 80,
          protocol: "tcp",
          scheduler: "mh",
          forwarding,
          backends: ["10.244.2.5", "10.244.1.5"].map((ip) => ({ ip, port: 80, weight: 1 })),
        },
      ]);
    // Servers in canonical order, so every LB's mh table is the same.
    expect(ipvsDiff([], web("dsr"))).toEqual([
      "-A -t 10.1.1.1:80 -s mh -b mh-fallback,mh-port",
      "-a -t 10.1.1.1:80 -r 10.244.1.5:80 -i -w 1",
      "-a -t 10.1.1.1:80 -r 10.244.2.5:80 -i -w 1",
    ]);
    // Edited, not re-added: the order stays, and IPVS keeps the service's connections.
    expect(ipvsDiff(web("snat"), web("dsr"))).toEqual([
      "-e -t 10.1.1.1:80 -r 10.244.1.5:80 -i -w 1",
      "-e -t 10.1.1.1:80 -r 10.244.2.5:80 -i -w 1",
    ]);
  });

  it("edits in place: a weight change is one -e, a scheduler change one -E", () => {
    const base = toIpvs([
      {
        vip: "10.1.1.10",
        port: 80,
        protocol: "tcp",
        scheduler: "rr",
        backends: [{ ip: "10.244.1.5", port: 8080, weight: 1 }],
      },
    ]);
    const drained = toIpvs([
      {
        vip: "10.1.1.10",
        port: 80,
        protocol: "tcp",
        scheduler: "lc",
        backends: [{ ip: "10.244.1.5", port: 8080, weight: 0 }],
      },
    ]);
    expect(ipvsDiff(base, drained)).toEqual([
      "-E -t 10.1.1.10:80 -s lc",
      "-e -t 10.1.1.10:80 -r 10.244.1.5:8080 -m -w 0",
    ]);
  });

  it("rejects what it does not understand instead of guessing", () => {
    expect(() => parseSave("-A -f 1 -s rr\n")).toThrow("only TCP/UDP virtual services are supported");
    expect(() => parseSave("-a -t 10.1.1.1:80 -r 10.0.0.1:80 -m -w 1\n")).toThrow(
      "real server before its virtual service",
    );
    expect(() => parseSave("-X -t 10.1.1.1:80\n")).toThrow("unexpected command");
    expect(() => parseSave("-A -t [::1]:80 -s rr\n")).toThrow("expected IPv4 address:port");
  });

  it("reads connections per virtual service from ipvsadm -Ln --stats --exact, not per real server", () => {
    const text = [
      "IP Virtual Server version 1.2.1 (size=4096)",
      "Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes",
      "  -> RemoteAddress:Port",
      "TCP  10.1.1.1:80                        12       72       48     4812     6240",
      "  -> 10.244.0.11:8080                    6       36       24     2406     3120",
      "UDP  10.1.1.2:53                    123456   123456   123456 98765432 98765432",
      "",
    ].join("\n");
    expect(parseStats(text)).toEqual([
      { protocol: "tcp", vip: "10.1.1.1", port: 80, connections: 12 },
      { protocol: "udp", vip: "10.1.1.2", port: 53, connections: 123456 },
    ]);
  });
});
