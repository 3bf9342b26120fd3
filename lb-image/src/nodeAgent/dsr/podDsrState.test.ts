import fc from "fast-check";
import {
  DSR_BACKEND_IPIP_DEVICE,
  DSR_BACKEND_MAC,
  DSR_BACKEND_DEVICE,
} from "../../dataplane/dsr/dsrTunnel.ts";
import {
  LO_LABEL,
  parsePodState,
  podAddresses,
  podSteps,
  type PodDsrState,
  type PodStep,
} from "./podDsrState.ts";

const link = (ifname: string, o: Record<string, unknown> = {}, addrs: Record<string, unknown>[] = []) => ({
  ifname,
  mtu: 1500,
  flags: ["UP"],
  address: "aa:bb:cc:dd:ee:ff",
  addr_info: addrs.map((a) => ({ family: "inet", prefixlen: 32, ...a })),
  ...o,
});
const vxlan = (data: Record<string, unknown>) => ({ linkinfo: { info_kind: "vxlan", info_data: data } });
const netconf = (all: string, dev?: string) =>
  JSON.stringify([
    { interface: "all", rp_filter: all },
    ...(dev ? [{ interface: DSR_BACKEND_DEVICE, rp_filter: dev }] : []),
  ]);

describe("pod DSR state", () => {
  const addr = JSON.stringify([
    link("lo", { mtu: 65536, flags: ["LOOPBACK", "UP"] }, [
      { local: "127.0.0.1", prefixlen: 8, label: "lo" },
      { local: "10.1.1.10", label: LO_LABEL },
      { local: "10.1.1.20", label: "lo" },
    ]),
    link("eth0", { mtu: 1450, link_index: 12, link_netnsid: 0 }, [
      { local: "10.244.1.5", prefixlen: 24, label: "eth0" },
    ]),
    link(DSR_BACKEND_DEVICE, {
      mtu: 1400,
      address: "02:70:6C:62:00:01",
      ifalias: "portable-lb dsr; rp_filter.all was 2",
      ...vxlan({ external: true, port: 4789 }),
    }),
  ]);

  it("reads the pod's MTU, the device, our VIPs on lo (by label) and rp_filter", () => {
    expect(parsePodState(addr, netconf("off", "off"), "10.244.1.5")).toEqual({
      podMtu: 1450,
      device: { contract: true, mtu: 1400, mac: DSR_BACKEND_MAC, up: true, rpFilterAllBefore: 2 },
      vips: ["10.1.1.10"],
      otherLo: ["127.0.0.1", "10.1.1.20"],
      rpFilter: { all: 0, device: 0 },
    } satisfies PodDsrState);
    // The pod's own address, with its veth's node-side end (the VXLAN device has none).
    expect(podAddresses(addr)).toEqual([{ ip: "10.244.1.5", peerIfindex: 12 }]);
    // Another pod's address: not here. A VXLAN device of another kind: not the contract's.
    expect(parsePodState(addr, netconf("strict"), "10.244.1.6").podMtu).toBeUndefined();
    const other = JSON.stringify([link(DSR_BACKEND_DEVICE, vxlan({ external: false, id: 5, port: 4789 }))]);
    expect(parsePodState(other, netconf("loose"), "").device?.contract).toBe(false);
    expect(parsePodState(other, netconf("loose"), "").rpFilter.all).toBe(2);
  });

  it("sets up a fresh pod: device, rp_filter off (all's value kept in the alias), VIPs labelled ours", () => {
    const fresh = parsePodState(
      JSON.stringify([link("lo"), link("eth0", { mtu: 1450 }, [{ local: "10.244.1.5", prefixlen: 24 }])]),
      netconf("strict"),
      "10.244.1.5",
    );
    expect(podSteps(fresh, ["10.1.1.10"])).toEqual([
      { ip: "link add plb-dsr-rx type vxlan external dstport 4789".split(" ") },
      {
        ip: [
          ..."link set plb-dsr-rx address 02:70:6c:62:00:01 mtu 1400 alias".split(" "),
          "portable-lb dsr; rp_filter.all was 1",
          "up",
        ],
      },
      { rpFilter: "all", value: 0 },
      { rpFilter: DSR_BACKEND_DEVICE, value: 0 },
      { ip: `addr add 10.1.1.10/32 dev lo label ${LO_LABEL}`.split(" ") },
    ]);
  });

  it("changes only what differs, never the pod's own addresses, and restores rp_filter on removal", () => {
    const s = parsePodState(addr, netconf("off", "off"), "10.244.1.5");
    expect(podSteps(s, ["10.1.1.10"])).toEqual([]);
    // 10.1.1.20 is the pod's own: present, so not added; 10.1.1.10 is no longer wanted.
    expect(podSteps(s, ["10.1.1.20", "10.1.1.11"])).toEqual([
      { ip: `addr add 10.1.1.11/32 dev lo label ${LO_LABEL}`.split(" ") },
      { ip: "addr del 10.1.1.10/32 dev lo".split(" ") },
    ]);
    expect(podSteps(s, [])).toEqual([
      { ip: "addr del 10.1.1.10/32 dev lo".split(" ") },
      { rpFilter: "all", value: 2 },
      { ip: ["link", "del", DSR_BACKEND_DEVICE] },
    ]);
    expect(() => podSteps(parsePodState(addr, netconf("off"), "10.244.1.9"), ["10.1.1.10"])).toThrow(
      /pod's own address is not in this network namespace/,
    );
  });

  it("adds the IPIP device beside VXLAN where LBs tunnel in IPIP, reads it back, and removes it", () => {
    const s = parsePodState(addr, netconf("off", "off"), "10.244.1.5");
    const ipipUp = { ip: `link set ${DSR_BACKEND_IPIP_DEVICE} up`.split(" ") };
    expect(podSteps(s, ["10.1.1.10"], true)).toEqual([
      { ip: `link add ${DSR_BACKEND_IPIP_DEVICE} type ipip external`.split(" ") },
      ipipUp,
      { rpFilter: DSR_BACKEND_IPIP_DEVICE, value: 0 },
    ]);
    const ipip = (external: boolean, flags = ["UP"]) =>
      link(DSR_BACKEND_IPIP_DEVICE, { flags, linkinfo: { info_kind: "ipip", info_data: { external } } });
    const withIpip = (device: object, rp = "off") =>
      parsePodState(
        JSON.stringify([...(JSON.parse(addr) as object[]), device]),
        JSON.stringify([
          ...(JSON.parse(netconf("off", "off")) as object[]),
          { interface: DSR_BACKEND_IPIP_DEVICE, rp_filter: rp },
        ]),
        "10.244.1.5",
      );
    expect(withIpip(ipip(true)).ipip).toEqual({ contract: true, up: true, rpFilter: 0 });
    expect(podSteps(withIpip(ipip(true)), ["10.1.1.10"], true)).toEqual([]);
    // Down, or strict: only that is fixed. A device that is not external is made again.
    expect(podSteps(withIpip(ipip(true, []), "strict"), ["10.1.1.10"], true)).toEqual([
      ipipUp,
      { rpFilter: DSR_BACKEND_IPIP_DEVICE, value: 0 },
    ]);
    expect(podSteps(withIpip(ipip(false)), ["10.1.1.10"], true).slice(0, 2)).toEqual([
      { ip: ["link", "del", DSR_BACKEND_IPIP_DEVICE] },
      { ip: `link add ${DSR_BACKEND_IPIP_DEVICE} type ipip external`.split(" ") },
    ]);
    // Not wanted (nftables LBs only, or a kernel without ipip), or the pod no longer a backend: gone.
    expect(podSteps(withIpip(ipip(true)), ["10.1.1.10"], false)).toEqual([
      { ip: ["link", "del", DSR_BACKEND_IPIP_DEVICE] },
    ]);
    expect(podSteps(withIpip(ipip(true)), [], true).at(-1)).toEqual({
      ip: ["link", "del", DSR_BACKEND_IPIP_DEVICE],
    });
  });

  it("converges from any state in one pass, and a second pass changes nothing (property)", () => {
    const vip = fc.constantFrom("10.1.1.1", "10.1.1.2", "10.1.1.3");
    const state: fc.Arbitrary<PodDsrState> = fc
      .record({
        podMtu: fc.constantFrom(1450, 1500),
        device: fc.option(
          fc.record({
            contract: fc.boolean(),
            mtu: fc.constantFrom(1400, 1450, 1500),
            mac: fc.constantFrom(DSR_BACKEND_MAC, "aa:aa:aa:aa:aa:aa"),
            up: fc.boolean(),
            rpFilterAllBefore: fc.constantFrom(undefined, 0, 1, 2),
          }),
          { nil: undefined },
        ),
        ipip: fc.option(
          fc.record({ contract: fc.boolean(), up: fc.boolean(), rpFilter: fc.constantFrom(0, 1, 2) }),
          { nil: undefined },
        ),
        vips: fc.uniqueArray(vip).map((v) => v.sort()),
        otherLo: fc.constant<string[]>(["127.0.0.1"]),
        rpFilter: fc.record({ all: fc.constantFrom(0, 1, 2), device: fc.constantFrom(0, 1, 2) }),
      })
      .map((s) => ({ ...s, rpFilter: { ...s.rpFilter, device: s.device ? s.rpFilter.device : undefined } }));
    fc.assert(
      fc.property(state, fc.uniqueArray(vip), fc.boolean(), (s, want, ipip) => {
        const after = simulate(s, podSteps(s, want, ipip));
        expect(podSteps(after, want, ipip)).toEqual([]);
        expect(after.ipip).toEqual(
          want.length > 0 && ipip ? { contract: true, up: true, rpFilter: 0 } : undefined,
        );
        expect(after.vips).toEqual([...want].sort());
        if (want.length > 0) {
          expect(after.device).toMatchObject({
            contract: true,
            mtu: s.podMtu! - 50,
            mac: DSR_BACKEND_MAC,
            up: true,
          });
          expect(after.rpFilter).toEqual({ all: 0, device: 0 });
          // Set up from scratch then removed: `all` is back where it was.
          if (!s.device) expect(simulate(after, podSteps(after, [])).rpFilter.all).toBe(s.rpFilter.all);
        } else expect(after.device).toBeUndefined();
        expect(after.otherLo).toEqual(s.otherLo);
      }),
    );
  });
});

/** What the kernel would make of the steps (a new device inherits rp_filter 1, as on many hosts). */
function simulate(s: PodDsrState, steps: PodStep[]): PodDsrState {
  const r: PodDsrState = structuredClone(s);
  for (const step of steps) {
    if ("rpFilter" in step) {
      if (step.rpFilter === DSR_BACKEND_IPIP_DEVICE) r.ipip!.rpFilter = step.value;
      else if (step.rpFilter === "all") r.rpFilter.all = step.value;
      else r.rpFilter.device = step.value;
      continue;
    }
    const [what, op, arg] = step.ip;
    if (what === "link" && arg === DSR_BACKEND_IPIP_DEVICE) {
      if (op === "del") r.ipip = undefined;
      else if (op === "add") r.ipip = { contract: true, up: false, rpFilter: 1 };
      else if (op === "set") r.ipip!.up = true;
      continue;
    }
    if (what === "addr" && op === "add") r.vips = [...r.vips, arg!.replace("/32", "")].sort();
    else if (what === "addr" && op === "del") r.vips = r.vips.filter((v) => `${v}/32` !== arg);
    else if (what === "link" && op === "del") {
      r.device = undefined;
      r.rpFilter.device = undefined;
    } else if (what === "link" && op === "add") {
      r.device = {
        contract: true,
        mtu: 1500,
        mac: "aa:aa:aa:aa:aa:aa",
        up: false,
        rpFilterAllBefore: undefined,
      };
      r.rpFilter.device = 1;
    } else if (what === "link" && op === "set") {
      const at = (k: string) => step.ip[step.ip.indexOf(k) + 1]!;
      r.device = {
        ...r.device!,
        mac: at("address"),
        mtu: Number(at("mtu")),
        up: true,
        rpFilterAllBefore: Number(at("alias").split("was ")[1]),
      };
    } else throw new Error(`unexpected step ${step.ip.join(" ")}`);
  }
  return r;
}
