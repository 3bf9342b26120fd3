import { desiredState } from "./desiredState.ts";
import { CLASS, lbService, slice } from "./testing/k8sObjects.ts";

const run = (
  services: Parameters<typeof desiredState>[0]["services"],
  slices: Parameters<typeof desiredState>[0]["slices"],
) => desiredState({ services, slices, loadBalancerClass: CLASS, scheduler: "mh" });

describe("desiredState", () => {
  it("maps each port of each allocated Service of our class to its ready endpoints", () => {
    const out = run(
      [lbService("web", { vips: ["10.1.1.10"] })],
      [slice("web", [{ ip: "10.244.1.5" }, { ip: "10.244.2.6" }])],
    );
    expect(out).toEqual({
      services: [
        {
          vip: "10.1.1.10",
          port: 80,
          protocol: "tcp",
          scheduler: "mh",
          backends: [
            { ip: "10.244.1.5", port: 8080, weight: 1 },
            { ip: "10.244.2.6", port: 8080, weight: 1 },
          ],
        },
      ],
      skipped: [],
    });
  });

  it("drains terminating endpoints (weight 0) and leaves out the not-ready ones", () => {
    const out = run(
      [lbService("web", { vips: ["10.1.1.10"] })],
      [
        slice("web", [
          { ip: "10.244.1.5" },
          { ip: "10.244.1.6", ready: false, serving: true, terminating: true },
          { ip: "10.244.1.7", ready: false },
        ]),
      ],
    );
    expect(out.services[0]!.backends).toEqual([
      { ip: "10.244.1.5", port: 8080, weight: 1 },
      { ip: "10.244.1.6", port: 8080, weight: 0 },
    ]);
  });

  it("ignores other classes, other types and Services still waiting for a VIP", () => {
    const out = run(
      [
        lbService("other", { vips: ["10.1.1.11"], class: "example.com/lb" }),
        lbService("waiting"),
        { ...lbService("np", { vips: ["10.1.1.12"] }), spec: { type: "NodePort" } },
      ],
      [slice("other", [{ ip: "10.244.1.5" }]), slice("waiting", [{ ip: "10.244.1.6" }])],
    );
    expect(out.services).toEqual([]);
  });

  it("matches slice ports by name, and joins endpoints from several slices", () => {
    const svc = lbService("web", {
      vips: ["10.1.1.10"],
      ports: [
        { name: "http", port: 80 },
        { name: "metrics", port: 9000 },
      ],
    });
    const out = run(
      [svc],
      [
        slice("web", [{ ip: "10.244.1.5" }], { name: "a" }),
        slice("web", [{ ip: "10.244.2.5" }], { name: "b" }),
        slice("web", [{ ip: "10.244.3.5" }], { name: "c", portName: "metrics", port: 9100 }),
      ],
    );
    expect(out.services.map((s) => [s.port, s.backends.map((b) => `${b.ip}:${b.port}`)])).toEqual([
      [80, ["10.244.1.5:8080", "10.244.2.5:8080"]],
      [9000, ["10.244.3.5:9100"]],
    ]);
  });

  it("skips garbage with a reason instead of failing: bad addresses, bad ports, SCTP", () => {
    const svc = lbService("web", {
      vips: ["10.1.1.10"],
      ports: [
        { name: "http", port: 80 },
        { name: "s", port: 90, protocol: "SCTP" },
      ],
    });
    const bad = slice("web", [{ ip: "10.244.1.5" }, { ip: "not-an-ip" }, { ip: "10.244.1.300" }]);
    const out = run([svc], [bad, slice("web", [{ ip: "10.244.9.9" }], { name: "badport", port: 70000 })]);
    expect(out.services).toHaveLength(1);
    expect(out.services[0]!.backends).toEqual([{ ip: "10.244.1.5", port: 8080, weight: 1 }]);
    expect(out.skipped.map((s) => [s.kind, s.object, s.reason]).sort()).toEqual([
      ["EndpointSlice", "default/badport", "InvalidPort"],
      ["EndpointSlice", "default/web-abc", "InvalidAddress"],
      ["EndpointSlice", "default/web-abc", "InvalidAddress"],
      ["Service", "default/web", "UnsupportedProtocol"],
    ]);
  });
});
