import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { cidrContains } from "@portable-lb/core/config";
import { Ipam, allocate, gatewayOf, prefixLength, release, type IpamState } from "./ipam.ts";

describe("pod CIDR helpers", () => {
  it("finds the gateway (the first address) and the prefix length, from any address in the prefix", () => {
    expect(gatewayOf("10.244.1.0/24")).toBe("10.244.1.1");
    expect(gatewayOf("10.244.1.7/24")).toBe("10.244.1.1");
    expect(prefixLength("10.244.1.0/24")).toBe(24);
  });

  it("refuses what is not an IPv4 prefix", () => {
    for (const bad of ["10.0.0.0", "10.0.0.0/33", "10.0.0.256/24", "x/24", "010.0.0.0/8"]) {
      expect(() => gatewayOf(bad)).toThrow(/not an IPv4 prefix/);
      expect(() => allocate({ cidr: bad, allocated: {} }, "pod-a")).toThrow(/not an IPv4 prefix/);
    }
  });
});

describe("allocate / release", () => {
  const empty: IpamState = { cidr: "10.244.1.0/29", allocated: {} };

  it("hands out addresses after the gateway, one per owner, idempotently", () => {
    const a = allocate(empty, "pod-a");
    expect(a.ip).toBe("10.244.1.2");
    expect(allocate(a.state, "pod-a")).toEqual(a);
    expect(allocate(a.state, "pod-b").ip).toBe("10.244.1.3");
  });

  it("does not reuse a released address at once: the next search starts after the last one handed out", () => {
    let s = allocate(empty, "a").state; // .2
    s = allocate(s, "b").state; // .3
    s = release(s, "a");
    const c = allocate(s, "c");
    expect(c.ip).toBe("10.244.1.4");
  });

  it("wraps around, never giving out the network, gateway or broadcast address, and says when it is full", () => {
    let s = empty;
    const got: string[] = [];
    for (const owner of ["a", "b", "c", "d", "e"]) {
      const r = allocate(s, owner);
      s = r.state;
      got.push(r.ip);
    }
    // A /29 has .0 (network), .1 (gateway), .7 (broadcast): five pod addresses.
    expect(got).toEqual(["10.244.1.2", "10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6"]);
    expect(() => allocate(s, "f")).toThrow(/is full/);
    s = release(s, "b");
    expect(allocate(s, "f").ip).toBe("10.244.1.3");
  });

  it("never gives one address to two owners (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 30 })), { maxLength: 200 }),
        (ops) => {
          let s: IpamState = { cidr: "10.0.0.0/27", allocated: {} };
          for (const [add, n] of ops) {
            if (add) {
              try {
                s = allocate(s, `p${n}`).state;
              } catch {
                // full
              }
            } else s = release(s, `p${n}`);
          }
          const owners = Object.values(s.allocated);
          expect(new Set(owners).size).toBe(owners.length);
          for (const ip of Object.keys(s.allocated)) {
            expect(cidrContains("10.0.0.0/27", ip)).toBe(true);
            expect(["10.0.0.0", "10.0.0.1", "10.0.0.31"]).not.toContain(ip);
          }
        },
      ),
    );
  });
});

describe("Ipam (persisted)", () => {
  const dir = mkdtempSync(join(tmpdir(), "plb-ipam-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps allocations across instances, and starts over for another pod CIDR", () => {
    const file = join(dir, "ipam.json");
    const a = new Ipam(file, "10.244.1.0/24");
    expect(a.allocate("uid-1")).toBe("10.244.1.2");
    const b = new Ipam(file, "10.244.1.0/24");
    expect(b.addressOf("uid-1")).toBe("10.244.1.2");
    expect(b.allocate("uid-2")).toBe("10.244.1.3");
    b.release("uid-1");
    expect(new Ipam(file, "10.244.1.0/24").owners()).toEqual(["uid-2"]);
    const c = new Ipam(file, "10.244.7.0/24");
    expect(c.owners()).toEqual([]);
    expect(JSON.parse(readFileSync(file, "utf8")).cidr).toBe("10.244.7.0/24");
  });
});
