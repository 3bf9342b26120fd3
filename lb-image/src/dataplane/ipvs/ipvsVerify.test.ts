// IpvsEngine's verification against ipvsadm's semantics (the simulator; the kernel itself is in the
// QEMU tests): whatever another program did to IPVS or to the engine's masquerading table, or left
// that `-Sn` cannot be read as ours, a verification finds it and repairs it toward the last applied
// state, by property.
import fc from "fast-check";
import { serviceKey, type VirtualService } from "../model.ts";
import { arbitraryState } from "../testing/arbitraries.ts";
import { toIpvs } from "./ipvsState.ts";
import { listed, readBack } from "./testing/ipvsSimulator.ts";
import { SimulatedIpvsEngine } from "./testing/simulatedIpvsEngine.ts";

const snatKeys = (state: VirtualService[]) =>
  new Set(state.filter((s) => (s.forwarding ?? "snat") === "snat").map(serviceKey));

describe("IpvsEngine.verify", () => {
  it("repairs any foreign change toward the last applied state and then verifies every service", async () => {
    await fc.assert(
      fc.asyncProperty(
        arbitraryState,
        arbitraryState,
        fc.boolean(),
        async (applied: VirtualService[], foreign: VirtualService[], breakTable: boolean) => {
          const engine = new SimulatedIpvsEngine();
          await engine.apply(applied);
          // Someone else's services (other schedulers, weights, server order) replace or join ours.
          engine.kernel = toIpvs(foreign).map((s, i) =>
            listed({ ...s, scheduler: i % 2 ? "wlc" : "mh", flags: [], inOrder: false }),
          );
          if (breakTable) engine.table = "broken";
          const report = await engine.verify("quick");
          expect(report.full).toBe(true);
          expect(readBack(engine.kernel)).toEqual(toIpvs(applied));
          expect(engine.table ?? new Set()).toEqual(snatKeys(applied));
          expect([...engine.verified()].length).toBe(applied.length);
          expect((await engine.verify("full")).drift).toEqual([]);
        },
      ),
      { numRuns: 100 },
    );
  });

  it("replaces what it cannot read (a firewall-mark service) with -C and a restore", async () => {
    const engine = new SimulatedIpvsEngine();
    const web = {
      vip: "10.1.1.1",
      port: 80,
      protocol: "tcp",
      scheduler: "mh",
      backends: [{ ip: "10.244.1.5", port: 8080, weight: 1 }],
    } as const;
    await engine.apply([{ ...web, backends: [...web.backends] }]);
    engine.foreign = "-A -f 7 -s rr\n";
    const report = await engine.verify("full");
    expect(report).toMatchObject({
      rebuilt: true,
      drift: [expect.objectContaining({ kind: "unparseable" })],
    });
    expect(readBack(engine.kernel)).toEqual(toIpvs([{ ...web, backends: [...web.backends] }]));
  });
});

describe("IpvsEngine masquerading (NAT mode) and tunnelling (DSR)", () => {
  const svc = (port: number, forwarding: VirtualService["forwarding"]): VirtualService => ({
    vip: "10.1.1.1",
    port,
    protocol: "tcp",
    scheduler: "mh",
    forwarding,
    backends: [{ ip: "10.244.1.5", port, weight: 1 }],
  });

  it("masquerades exactly the snat services, writing the table before IPVS takes their traffic", async () => {
    const engine = new SimulatedIpvsEngine();
    await engine.apply([svc(80, "snat"), svc(81, "dsr"), svc(82, undefined)]);
    expect(engine.writes.map((w) => w.tool)).toEqual(["nft", "ipvsadm"]);
    expect(engine.table).toEqual(new Set(["tcp:10.1.1.1:80", "tcp:10.1.1.1:82"]));
    expect(engine.writes[1]!.text).toContain("-a -t 10.1.1.1:80 -r 10.244.1.5:80 -m -w 1");
    expect(engine.writes[1]!.text).toContain("-a -t 10.1.1.1:81 -r 10.244.1.5:81 -i -w 1");
    // Removing a masqueraded service: IPVS first, the table after.
    await engine.apply([svc(81, "dsr"), svc(82, "snat")]);
    expect(engine.writes.slice(2).map((w) => w.tool)).toEqual(["ipvsadm", "nft"]);
    expect(engine.table).toEqual(new Set(["tcp:10.1.1.1:82"]));
    // Nothing changed: nothing written.
    await engine.apply([svc(81, "dsr"), svc(82, "snat")]);
    expect(engine.writes).toHaveLength(4);
  });

  it("rewrites a damaged table and strips a stray element, leaving IPVS alone", async () => {
    const engine = new SimulatedIpvsEngine();
    await engine.apply([svc(80, "snat"), svc(81, "dsr")]);
    const written = engine.writes.length;
    engine.table = "broken";
    const damaged = await engine.verify("full");
    expect(damaged.drift).toContainEqual(expect.objectContaining({ kind: "base", rebuild: false }));
    expect(engine.table).toEqual(new Set(["tcp:10.1.1.1:80"]));
    engine.table = new Set(["tcp:10.1.1.1:80", "tcp:10.1.1.9:80"]);
    const stray = await engine.verify("full");
    expect(stray.drift).toContainEqual(
      expect.objectContaining({ kind: "foreign", detail: expect.stringContaining("tcp:10.1.1.9:80") }),
    );
    expect(engine.table).toEqual(new Set(["tcp:10.1.1.1:80"]));
    expect(engine.writes.slice(written).map((w) => w.tool)).toEqual(["nft", "nft"]);
  });

  it("judges again, never rebuilds on, a read that saw an apply half done (its table, not IPVS)", async () => {
    const engine = new SimulatedIpvsEngine();
    await engine.apply([]);
    // The read lands between an apply's two writes: the table already masquerades the new service,
    // IPVS does not serve it yet (seen in the QEMU guest: the two are read side by side).
    engine.table = new Set(["tcp:10.1.1.1:80"]);
    const inspection = await engine.inspect("full");
    expect(inspection.drift).toEqual([expect.objectContaining({ kind: "foreign", rebuild: true })]);
    engine.table = undefined;
    await engine.apply([svc(80, "snat")]);
    const written = engine.writes.length;
    expect(await engine.repair(inspection)).toMatchObject({ drift: [], rebuilt: false, repaired: 0 });
    expect(engine.writes).toHaveLength(written);
    expect([...engine.verified()]).toEqual(["tcp:10.1.1.1:80"]);
  });

  it("refuses a DSR service whose backends listen on another port (IPVS tunnels keep the port)", async () => {
    const engine = new SimulatedIpvsEngine();
    await expect(
      engine.apply([{ ...svc(80, "dsr"), backends: [{ ip: "10.244.1.5", port: 8080, weight: 1 }] }]),
    ).rejects.toThrow(/forwarding "dsr" cannot remap port 80 to backend 10.244.1.5:8080/);
    expect(engine.writes).toEqual([]);
  });
});
