import fc from "fast-check";
import {
  DECAP_PREF,
  decapSteps,
  objectTagProbe,
  parseDevices,
  parseObjectTag,
  podUplinks,
  readBatch,
  type DecapDevice,
  type TcStep,
} from "./podDecap.ts";

// Captured on this machine (kernel 6.18, iproute2 6.1 with libbpf 1.1): `ip -j addr show` in a pod
// namespace, and `tc -j -batch -` fed readBatch(["eth0"]) without clsact, and with our filter on
// ingress and another program on egress.
const ADDR =
  '[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK"],"mtu":65536,"addr_info":[]},{"ifindex":2,"link":"eth0","ifname":"p1","flags":["BROADCAST","MULTICAST","M-DOWN"],"mtu":1500,"addr_info":[]},{"ifindex":3,"link":"p1","ifname":"eth0","flags":["BROADCAST","MULTICAST","M-DOWN"],"mtu":1500,"addr_info":[{"family":"inet","local":"10.244.1.5","prefixlen":24,"scope":"global","label":"eth0"}]}]';
const BARE = "[]\n[]\n[]\n";
const TAG = "660a7eaa388fc1f4";
const ATTACHED = [
  '[{"kind":"clsact","handle":"ffff:","parent":"ffff:fff1","options":{}}]',
  `[{"protocol":"all","pref":65000,"kind":"bpf","chain":0},{"protocol":"all","pref":65000,"kind":"bpf","chain":0,"options":{"handle":"0x1","bpf_name":"dsr_decap.o:[tc]","direct-action":true,"not_in_hw":true,"prog":{"id":104,"name":"dsr_decap","tag":"${TAG}","jited":1}}}]`,
  '[{"protocol":"all","pref":1,"kind":"bpf","chain":0},{"protocol":"all","pref":1,"kind":"bpf","chain":0,"options":{"handle":"0x1","bpf_name":"cni.o:[tc]","direct-action":true,"not_in_hw":true,"prog":{"id":108,"name":"cni_egress","tag":"0123456789abcdef","jited":1}}}]',
].join("\n");
const OBJECT = "/usr/lib/portable-lb/dsr_decap.o";
const wanted = { device: "eth0", object: OBJECT, tag: TAG };
const attach = (dev: string): TcStep => ({
  tc: `filter replace dev ${dev} ingress pref ${DECAP_PREF} handle 1 bpf direct-action obj ${OBJECT} sec tc`.split(
    " ",
  ),
});
const device = (o: Partial<DecapDevice> = {}): DecapDevice => ({
  name: "eth0",
  clsact: true,
  tag: TAG,
  others: 0,
  prefTaken: false,
  clsactOurs: false,
  ...o,
});

describe("pod BPF decapsulation", () => {
  it("finds the pod's uplink by its address, and every addressed interface", () => {
    expect(podUplinks(ADDR, "10.244.1.5")).toEqual({ uplink: "eth0", all: ["eth0"] });
    expect(podUplinks(ADDR, "")).toEqual({ uplink: undefined, all: ["eth0"] });
  });

  it("reads tc's listings: clsact, our filter by pref and program name, its tag, the others", () => {
    expect(readBatch(["eth0"])).toBe(
      "qdisc show dev eth0\nfilter show dev eth0 ingress\nfilter show dev eth0 egress\n",
    );
    expect(parseDevices(["eth0"], BARE, new Set())).toEqual([device({ clsact: false, tag: undefined })]);
    expect(parseDevices(["eth0"], ATTACHED, new Set(["eth0"]))).toEqual([
      device({ others: 2, clsactOurs: true }),
    ]);
    // Another program at our pref is someone else's.
    const taken = ATTACHED.replace('"name":"dsr_decap"', '"name":"other"');
    expect(parseDevices(["eth0"], taken, new Set())).toEqual([
      device({ tag: undefined, others: 2, prefTaken: true }),
    ]);
    expect(() => parseDevices(["eth0", "eth1"], BARE, new Set())).toThrow(/3 listings for 6/);
  });

  it("attaches to a fresh pod, leaves a current filter alone, replaces another program", () => {
    expect(decapSteps(parseDevices(["eth0"], BARE, new Set()), wanted)).toEqual([
      { tc: "qdisc add dev eth0 clsact".split(" ") },
      attach("eth0"),
    ]);
    expect(decapSteps([device()], wanted)).toEqual([]);
    expect(decapSteps([device({ tag: "ffffffffffffffff" })], wanted)).toEqual([attach("eth0")]);
    expect(() => decapSteps([device({ tag: undefined, prefTaken: true })], wanted)).toThrow(
      /another filter holds pref/,
    );
  });

  it("removes our filter, and the clsact qdisc only where we added it and nothing else is on it", () => {
    const del = { tc: `filter del dev eth0 ingress pref ${DECAP_PREF}`.split(" ") };
    const delQdisc = { tc: "qdisc del dev eth0 clsact".split(" ") };
    expect(decapSteps([device()], undefined)).toEqual([del]);
    expect(decapSteps([device({ clsactOurs: true })], undefined)).toEqual([del, delQdisc]);
    expect(decapSteps([device({ clsactOurs: true, others: 1 })], undefined)).toEqual([del]);
    expect(decapSteps([device({ tag: undefined })], undefined)).toEqual([]);
    // The uplink moved to another interface: off the old one, onto the new one.
    expect(
      decapSteps([device(), device({ name: "net1", clsact: false, tag: undefined })], {
        ...wanted,
        device: "net1",
      }),
    ).toEqual([del, { tc: "qdisc add dev net1 clsact".split(" ") }, attach("net1")]);
  });

  it("learns the object's tag from a load in a throwaway namespace", () => {
    expect(objectTagProbe(OBJECT)).toBe(
      `qdisc add dev lo clsact\nfilter add dev lo ingress pref ${DECAP_PREF} handle 1 bpf direct-action obj ${OBJECT} sec tc\nfilter show dev lo ingress\n`,
    );
    expect(() => objectTagProbe("/tmp/a b/dsr_decap.o")).toThrow(/white space/);
    // Captured: the probe's output (the two adds print nothing).
    expect(parseObjectTag(ATTACHED.split("\n")[1]!)).toBe(TAG);
    expect(() => parseObjectTag("[]\n")).toThrow(/no program dsr_decap/);
  });

  it("converges in one pass from any state, and a second pass changes nothing (property)", () => {
    const arb = fc.record({
      clsact: fc.boolean(),
      tag: fc.constantFrom(undefined, TAG, "ffffffffffffffff"),
      others: fc.constantFrom(0, 1),
      clsactOurs: fc.boolean(),
      want: fc.boolean(),
    });
    fc.assert(
      fc.property(arb, ({ want, ...d }) => {
        const before = device({ ...d, clsactOurs: d.clsact && d.clsactOurs });
        const w = want ? wanted : undefined;
        const after = { ...before };
        for (const { tc } of decapSteps([before], w)) {
          const [kind, op] = tc;
          if (kind === "qdisc") after.clsact = op === "add";
          if (kind === "qdisc") after.clsactOurs = op === "add";
          if (kind === "filter") after.tag = op === "del" ? undefined : TAG;
        }
        expect(decapSteps([after], w)).toEqual([]);
        expect(after.tag).toBe(want ? TAG : undefined);
      }),
    );
  });
});
