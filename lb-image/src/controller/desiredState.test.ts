import type { V1EndpointSlice, V1NetworkPolicy, V1Service } from "@kubernetes/client-node";
import { desiredState, isOurs, type DesiredStateCache } from "./desiredState.ts";
import type { LbPeers } from "./dsrPolicy.ts";
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
          forwarding: "snat",
          backends: [
            { ip: "10.244.1.5", port: 8080, weight: 1 },
            { ip: "10.244.2.6", port: 8080, weight: 1 },
          ],
        },
      ],
      skipped: [],
      healthTargets: [],
    });
  });

  it("takes Services of its class, and classless ones only as the cluster's default", () => {
    const classless = { ...lbService("plain"), spec: { type: "LoadBalancer", ports: [{ port: 80 }] } };
    const other = lbService("other", { class: "example.com/lb" });
    const nodePort = { ...lbService("np"), spec: { type: "NodePort", ports: [{ port: 80 }] } };
    const ours = lbService("ours");
    const served = (serveClassless: boolean) =>
      [classless, other, nodePort, ours]
        .filter((s) => isOurs(s, { loadBalancerClass: CLASS, serveClassless }))
        .map((s) => s.metadata!.name);
    expect(served(false)).toEqual(["ours"]);
    expect(served(true)).toEqual(["plain", "ours"]);
    // And the desired state follows: the classless Service's VIP is served only as the default.
    const withVip = { ...classless, status: { loadBalancer: { ingress: [{ ip: "10.1.1.12" }] } } };
    const vips = (serveClassless: boolean) =>
      desiredState({
        services: [withVip],
        slices: [slice("plain", [{ ip: "10.244.1.5" }], { portName: "" })],
        loadBalancerClass: CLASS,
        serveClassless,
        scheduler: "mh",
      }).services.map((s) => s.vip);
    expect(vips(false)).toEqual([]);
    expect(vips(true)).toEqual(["10.1.1.12"]);
  });

  it("serves a port by DSR where its backends listen on the Service's port, else by SNAT with a reason", () => {
    const out = desiredState({
      services: [
        lbService("same", { vips: ["10.1.1.10"], ports: [{ name: "http", port: 80 }] }),
        lbService("remapped", { vips: ["10.1.1.11"], ports: [{ name: "http", port: 80 }] }),
      ],
      slices: [
        slice("same", [{ ip: "10.244.1.5" }], { port: 80 }),
        slice("remapped", [{ ip: "10.244.1.6" }], { port: 8080 }),
      ],
      loadBalancerClass: CLASS,
      scheduler: "mh",
      forwarding: "dsr",
    });
    expect(out.services.map((s) => [s.vip, s.forwarding])).toEqual([
      ["10.1.1.10", "dsr"],
      ["10.1.1.11", "snat"],
    ]);
    expect(out.skipped).toEqual([
      expect.objectContaining({
        object: "default/remapped",
        reason: "DirectServerReturnUnavailable",
        message: expect.stringMatching(
          /listen on 8080, not on 80.*served through SNAT.*Set targetPort to 80/,
        ),
      }),
    ]);
  });

  it("relays a handover on DSR ports where the engine can, and refuses it out loud elsewhere", () => {
    const handover = {
      "portable-lb.io/handover-from": "192.168.100.12, 192.168.100.11,lb3",
      "portable-lb.io/handover-relay": "all",
    };
    const input = (relaysHandover: boolean) =>
      desiredState({
        services: [
          lbService("same", {
            vips: ["10.1.1.10"],
            ports: [{ name: "http", port: 80 }],
            annotations: handover,
          }),
          lbService("remapped", {
            vips: ["10.1.1.11"],
            ports: [{ name: "http", port: 80 }],
            annotations: handover,
          }),
          lbService("plain", { vips: ["10.1.1.12"], ports: [{ name: "http", port: 80 }] }),
        ],
        slices: [
          slice("same", [{ ip: "10.244.1.5" }], { port: 80 }),
          slice("remapped", [{ ip: "10.244.1.6" }], { port: 8080 }),
          slice("plain", [{ ip: "10.244.1.7" }], { port: 80 }),
        ],
        loadBalancerClass: CLASS,
        scheduler: "mh",
        forwarding: "dsr",
        relaysHandover,
      });
    const nft = input(true);
    // The addresses sorted, the bad one left out (and told).
    expect(nft.services.map((s) => [s.vip, s.forwarding, s.handover])).toEqual([
      ["10.1.1.10", "dsr", { to: ["192.168.100.11", "192.168.100.12"], relay: "all" }],
      ["10.1.1.11", "snat", undefined],
      ["10.1.1.12", "dsr", undefined],
    ]);
    const reasons = (out: typeof nft) => out.skipped.map((p) => [p.object, p.reason]);
    expect(reasons(nft)).toEqual([
      ["default/same", "InvalidHandover"],
      ["default/remapped", "InvalidHandover"],
      ["default/remapped", "DirectServerReturnUnavailable"],
      ["default/remapped", "HandoverUnsupported"],
    ]);
    expect(nft.skipped.find((p) => p.reason === "HandoverUnsupported")!.message).toMatch(
      /^port http: annotation portable-lb\.io\/handover-from is not honoured: the port is served by SNAT/,
    );
    const ipvs = input(false);
    expect(ipvs.services.every((s) => s.handover === undefined)).toBe(true);
    expect(ipvs.skipped.filter((p) => p.reason === "HandoverUnsupported").map((p) => p.message)).toEqual([
      expect.stringMatching(/this data plane \(IPVS\) cannot relay flows; set dataPlane\.engine nftables/),
      expect.stringMatching(/this data plane \(IPVS\)/),
    ]);
  });

  it("keeps a ClientIP client on one backend where every LB pod hashes its address alike, else says why not", () => {
    const withAffinity = (name: string, vip: string, spec: Partial<V1Service["spec"]>) => {
      const svc = lbService(name, { vips: [vip] });
      return { ...svc, spec: { ...svc.spec!, ...spec } };
    };
    const input = (hashesOnClient: boolean, scheduler: "mh" | "rr") =>
      desiredState({
        services: [
          withAffinity("sticky", "10.1.1.10", {
            sessionAffinity: "ClientIP",
            sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
          }),
          withAffinity("loose", "10.1.1.11", { sessionAffinity: "None" }),
        ],
        slices: [slice("sticky", [{ ip: "10.244.1.5" }]), slice("loose", [{ ip: "10.244.1.6" }])],
        loadBalancerClass: CLASS,
        scheduler,
        hashesOnClient,
      });
    const honoured = input(true, "mh");
    expect(honoured.services.map((s) => [s.backends[0]!.ip, s.affinity])).toEqual([
      ["10.244.1.5", "clientIP"],
      ["10.244.1.6", undefined],
    ]);
    expect(honoured.skipped).toEqual([]);
    const refused = input(false, "rr");
    expect(refused.services.map((s) => s.affinity)).toEqual([undefined, undefined]);
    expect(refused.skipped).toEqual([
      expect.objectContaining({
        object: "default/sticky",
        reason: "SessionAffinityUnsupported",
        message: expect.stringMatching(/dataPlane\.scheduler rr.*Set dataPlane\.scheduler mh/),
      }),
    ]);
  });

  it("serves externalTrafficPolicy Local by DSR, and warns per port where SNAT hides the client's address", () => {
    const local = (name: string) => {
      const svc = lbService(name, {
        vips: [`10.1.1.${name === "same" ? 10 : 11}`],
        ports: [{ name: "http", port: 80 }],
      });
      return { ...svc, spec: { ...svc.spec!, externalTrafficPolicy: "Local" } };
    };
    const slices = [
      slice("same", [{ ip: "10.244.1.5" }], { port: 80 }),
      slice("remapped", [{ ip: "10.244.1.6" }], { port: 8080 }),
    ];
    const run = (forwarding: "dsr" | "snat") =>
      desiredState({
        services: [local("same"), local("remapped")],
        slices,
        loadBalancerClass: CLASS,
        scheduler: "mh",
        forwarding,
      });
    const dsr = run("dsr");
    expect(dsr.services.map((s) => [s.vip, s.forwarding])).toEqual([
      ["10.1.1.10", "dsr"],
      ["10.1.1.11", "snat"],
    ]);
    const unmet = (out: typeof dsr) =>
      out.skipped.filter((p) => p.reason === "ExternalTrafficPolicyLocalUnmet");
    expect(unmet(dsr)).toEqual([
      expect.objectContaining({
        object: "default/remapped",
        message: expect.stringMatching(/^port http: .*its DirectServerReturn Event says why/),
      }),
    ]);
    // Served all the same, both of them, with the fix named.
    const snat = run("snat");
    expect(snat.services.map((s) => s.forwarding)).toEqual(["snat", "snat"]);
    expect(unmet(snat).map((p) => [p.object, p.message])).toEqual([
      ["default/same", expect.stringMatching(/Set dataPlane\.mode dsr/)],
      ["default/remapped", expect.stringMatching(/Set dataPlane\.mode dsr/)],
    ]);
  });

  it("takes an unknown relay as all, and says so", () => {
    const out = desiredState({
      services: [
        lbService("same", {
          vips: ["10.1.1.10"],
          ports: [{ name: "http", port: 80 }],
          annotations: {
            "portable-lb.io/handover-from": "192.168.100.11",
            "portable-lb.io/handover-relay": "some",
          },
        }),
      ],
      slices: [slice("same", [{ ip: "10.244.1.5" }], { port: 80 })],
      loadBalancerClass: CLASS,
      scheduler: "mh",
      forwarding: "dsr",
      relaysHandover: true,
    });
    expect(out.services[0]!.handover).toEqual({ to: ["192.168.100.11"], relay: "all" });
    expect(out.skipped.map((p) => p.message)).toEqual([
      'annotation portable-lb.io/handover-relay: "some" is not a relay; use all or established (relaying all flows meanwhile)',
    ]);
  });

  it("serves a DSR port by SNAT while a NetworkPolicy keeps the tunnel from its backends, and says how to fix it", () => {
    const lb: LbPeers = {
      namespace: "lb-system",
      podLabels: { app: "portable-lb-controller" },
      podSelector: { app: "portable-lb-controller" },
      podCidr: "10.244.0.0/16",
      tunnel: "vxlan",
    };
    const web = lbService("web", { vips: ["10.1.1.10"], uid: "u1", selector: { app: "web" } });
    const deny: V1NetworkPolicy = {
      metadata: { name: "web-ingress", namespace: "default" },
      spec: { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Ingress"], ingress: [] },
    };
    const state = (policies: V1NetworkPolicy[], forwarding: "dsr" | "snat" = "dsr", peers = lb) =>
      desiredState({
        services: [web],
        slices: [slice("web", [{ ip: "10.244.1.5" }], { port: 80 })],
        loadBalancerClass: CLASS,
        scheduler: "mh",
        forwarding,
        networkPolicies: { policies, lb: peers },
      });
    const blocked = state([deny]);
    expect(blocked.services.map((s) => s.forwarding)).toEqual(["snat"]);
    expect(blocked.skipped).toEqual([
      {
        object: "default/web",
        uid: "u1",
        kind: "Service",
        reason: "DirectServerReturnBlockedByNetworkPolicy",
        message: expect.stringContaining(
          "NetworkPolicy default/web-ingress selects its backends and allows no UDP 4789 (the DSR tunnel) from the LB pods",
        ),
      },
    ]);
    expect(blocked.skipped[0]!.message).toContain(
      '{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"lb-system"}},"podSelector":{"matchLabels":{"app":"portable-lb-controller"}}}],"ports":[{"protocol":"UDP","port":4789}]}',
    );
    // Once the policy has the rule, DSR comes back.
    const fixed = {
      ...deny,
      spec: {
        ...deny.spec!,
        ingress: [{ _from: [{ namespaceSelector: {} }], ports: [{ protocol: "UDP", port: 4789 }] }],
      },
    };
    expect(state([fixed])).toMatchObject({ services: [{ forwarding: "dsr" }], skipped: [] });
    // IPVS tunnel mode sends IPIP, which that rule's port cannot admit: the Event says which rule can.
    const ipip = state([fixed], "dsr", { ...lb, tunnel: "ipip" });
    expect(ipip.services.map((s) => s.forwarding)).toEqual(["snat"]);
    expect(ipip.skipped[0]!.message).toContain(
      "allows no IPIP (IP protocol 4, IPVS tunnel mode: only a rule without ports admits it) (the DSR tunnel) from the LB pods",
    );
    expect(ipip.skipped[0]!.message).toContain(
      '"podSelector":{"matchLabels":{"app":"portable-lb-controller"}}}]}',
    );
    // SNAT never looks at policies.
    expect(state([deny], "snat")).toMatchObject({ services: [{ forwarding: "snat" }], skipped: [] });
  });

  it("serves a DSR port by SNAT while a backend's node cannot decapsulate IPIP, naming the nodes and the fix", () => {
    const web = lbService("web", { vips: ["10.1.1.10"], uid: "u1" });
    const other = lbService("api", { vips: ["10.1.1.11"] });
    const state = (nodesWithoutIpip: ReadonlySet<string> | undefined, forwarding: "dsr" | "snat" = "dsr") =>
      desiredState({
        services: [web, other],
        slices: [
          slice(
            "web",
            [
              { ip: "10.244.1.5", nodeName: "n1" },
              { ip: "10.244.2.6", nodeName: "n2" },
              { ip: "10.244.3.7", nodeName: "n3" },
            ],
            { port: 80 },
          ),
          slice("api", [{ ip: "10.244.1.8", nodeName: "n1" }], { port: 80 }),
        ],
        loadBalancerClass: CLASS,
        scheduler: "mh",
        forwarding,
        ...(nodesWithoutIpip && { nodesWithoutIpip }),
      });
    const lacking = state(new Set(["n3", "n2", "n9"]));
    // Only the Service with backends there falls back; the other keeps DSR.
    expect(lacking.services.map((s) => [s.vip, s.forwarding])).toEqual([
      ["10.1.1.10", "snat"],
      ["10.1.1.11", "dsr"],
    ]);
    expect(lacking.skipped).toEqual([
      {
        object: "default/web",
        uid: "u1",
        kind: "Service",
        reason: "DirectServerReturnNoIpip",
        message: expect.stringMatching(
          /^port http: backends run on nodes n2, n3, whose kernels have no ipip .* served through SNAT instead .* load ipip there \(modprobe ipip\) and restart the node agent on each, or set dataPlane\.engine nftables/,
        ),
      },
    ]);
    // Every node decapsulates (or nobody watches): DSR; SNAT never asks.
    expect(state(new Set())).toMatchObject({
      services: [{ forwarding: "dsr" }, { forwarding: "dsr" }],
      skipped: [],
    });
    expect(state(undefined)).toMatchObject({ skipped: [] });
    expect(state(new Set(["n3"]), "snat")).toMatchObject({ skipped: [] });
  });

  it("admits only a Service's source ranges: the field, else the annotation; an invalid list admits no one", () => {
    const ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges";
    const withRanges = (field: string[] | undefined, annotation?: string) => {
      const svc = lbService("web", {
        vips: ["10.1.1.10"],
        uid: "u1",
        ...(annotation !== undefined && { annotations: { [ANNOTATION]: annotation } }),
      });
      if (field) svc.spec!.loadBalancerSourceRanges = field;
      return desiredState({
        services: [svc, lbService("open", { vips: ["10.1.1.11"] })],
        slices: [slice("web", [{ ip: "10.244.1.5" }]), slice("open", [{ ip: "10.244.1.6" }])],
        loadBalancerClass: CLASS,
        scheduler: "mh",
      });
    };
    const ranges = (out: ReturnType<typeof withRanges>) => out.services.map((s) => s.sourceRanges);
    // The field wins over the annotation; a Service without either admits everyone.
    expect(ranges(withRanges([" 10.0.0.0/8", "203.0.113.7/24"], "192.168.0.0/16"))).toEqual([
      ["10.0.0.0-10.255.255.255", "203.0.113.0-203.0.113.255"],
      undefined,
    ]);
    expect(ranges(withRanges(undefined, "192.168.0.0/16"))).toEqual([
      ["192.168.0.0-192.168.255.255"],
      undefined,
    ]);
    // The API server refuses invalid lists; one that came past it never opens the Service.
    const invalid = withRanges(undefined, "192.168.0.0/16, office,10.0.0.1");
    expect(ranges(invalid)).toEqual([[], undefined]);
    expect(invalid.skipped).toEqual([
      {
        object: "default/web",
        uid: "u1",
        kind: "Service",
        reason: "InvalidSourceRanges",
        message:
          'annotation service.beta.kubernetes.io/load-balancer-source-ranges: "office", "10.0.0.1" are not an IP range; write CIDRs such as 203.0.113.0/24, separated by commas. No client may reach the Service until that is fixed',
      },
    ]);
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

  it("counts endpoints not ready yet as backends taking no flows where asked (the node agent)", () => {
    const endpoints = [
      { ip: "10.244.1.5" },
      { ip: "10.244.1.6", ready: false, serving: true, terminating: true },
      { ip: "10.244.1.7", ready: false },
      { ip: "10.244.1.8", ready: false, serving: false, terminating: true },
    ];
    const out = desiredState({
      services: [lbService("web", { vips: ["10.1.1.10"] })],
      slices: [slice("web", endpoints)],
      loadBalancerClass: CLASS,
      scheduler: "mh",
      startingBackends: true,
    });
    // A terminating endpoint that no longer serves is out either way.
    expect(out.services[0]!.backends).toEqual([
      { ip: "10.244.1.5", port: 8080, weight: 1 },
      { ip: "10.244.1.6", port: 8080, weight: 0 },
      { ip: "10.244.1.7", port: 8080, weight: 0 },
    ]);
  });

  it("carries each endpoint's node (direct server return prepares the backend's node)", () => {
    const out = run(
      [lbService("web", { vips: ["10.1.1.10"] })],
      [slice("web", [{ ip: "10.244.1.5", nodeName: "n1" }, { ip: "10.244.2.6" }])],
    );
    expect(out.services[0]!.backends).toEqual([
      { ip: "10.244.1.5", port: 8080, weight: 1, nodeName: "n1" },
      { ip: "10.244.2.6", port: 8080, weight: 1 },
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
      uid: "u-web",
      vips: ["10.1.1.10"],
      ports: [
        { name: "http", port: 80 },
        { name: "s", port: 90, protocol: "SCTP" },
      ],
    });
    const bad = slice("web", [{ ip: "10.244.1.5" }, { ip: "not-an-ip" }, { ip: "10.244.1.300" }]);
    bad.metadata!.uid = "u-abc";
    const out = run([svc], [bad, slice("web", [{ ip: "10.244.9.9" }], { name: "badport", port: 70000 })]);
    expect(out.services).toHaveLength(1);
    expect(out.services[0]!.backends).toEqual([{ ip: "10.244.1.5", port: 8080, weight: 1 }]);
    // Each names its object's uid, which the Event needs to show in `kubectl describe`.
    expect(out.skipped.map((s) => [s.kind, s.object, s.uid, s.reason]).sort()).toEqual([
      ["EndpointSlice", "default/badport", undefined, "InvalidPort"],
      ["EndpointSlice", "default/web-abc", "u-abc", "InvalidAddress"],
      ["EndpointSlice", "default/web-abc", "u-abc", "InvalidAddress"],
      ["Service", "default/web", "u-web", "UnsupportedProtocol"],
    ]);
  });

  describe("active health checks", () => {
    const checked = (annotation: string) =>
      lbService("web", { vips: ["10.1.1.10"], annotations: { "portable-lb.io/health-check": annotation } });
    const three = slice("web", [
      { ip: "10.244.1.5" },
      { ip: "10.244.1.6" },
      { ip: "10.244.1.7", ready: false, serving: true, terminating: true },
    ]);
    const withDown = (down: string[]) =>
      desiredState({
        services: [checked("http:/healthz fall=2")],
        slices: [three],
        loadBalancerClass: CLASS,
        scheduler: "mh",
        isUnhealthy: (t) => down.includes(t.ip),
      });

    it("asks to check the ready endpoints only, with the Service's spec", () => {
      const out = withDown([]);
      expect(out.healthTargets.map((t) => `${t.ip}:${t.port}`)).toEqual([
        "10.244.1.5:8080",
        "10.244.1.6:8080",
      ]);
      expect(out.healthTargets[0]!.spec).toEqual({
        kind: "http",
        path: "/healthz",
        intervalMs: 2000,
        timeoutMs: 1000,
        fall: 2,
        rise: 2,
      });
    });

    it("drains a ready endpoint that fails its checks (weight 0), like a terminating one", () => {
      expect(withDown(["10.244.1.5"]).services[0]!.backends.map((b) => [b.ip, b.weight])).toEqual([
        ["10.244.1.5", 0],
        ["10.244.1.6", 1],
        ["10.244.1.7", 0],
      ]);
    });

    it("fails open when every ready endpoint fails: the checks are ignored", () => {
      expect(withDown(["10.244.1.5", "10.244.1.6"]).services[0]!.backends.map((b) => b.weight)).toEqual([
        1, 1, 0,
      ]);
    });

    it("reports a bad annotation and serves without checks", () => {
      const out = run([checked("icmp")], [three]);
      expect(out.services[0]!.backends.map((b) => b.weight)).toEqual([1, 1, 0]);
      expect(out.healthTargets).toEqual([]);
      expect(out.skipped).toEqual([
        {
          object: "default/web",
          kind: "Service",
          reason: "InvalidHealthCheck",
          message:
            'annotation portable-lb.io/health-check: "icmp" is not a check; use "tcp" or "http:/path" (got "icmp"); serving without active checks',
        },
      ]);
    });
  });
});

describe("desiredState with a cache", () => {
  const services = [lbService("a", { vips: ["10.1.1.1"] }), lbService("b", { vips: ["10.1.1.2"] })];
  const sliceA = slice("a", [{ ip: "10.244.1.1" }]);
  const withCache = (cache: DesiredStateCache, svcs: V1Service[], slices: V1EndpointSlice[]) =>
    desiredState({ services: svcs, slices, loadBalancerClass: CLASS, scheduler: "mh", cache });

  it("gives what a fresh computation gives, rebuilding only the ports whose slices changed", () => {
    const cache: DesiredStateCache = new Map();
    const first = withCache(cache, services, [sliceA, slice("b", [{ ip: "10.244.1.2" }])]);
    const changedB = slice("b", [{ ip: "10.244.1.3" }, { ip: "not-an-ip" }]);
    const second = withCache(cache, services, [sliceA, changedB]);
    expect(second).toEqual(run(services, [sliceA, changedB]));
    expect(second.services[0]!.backends).toBe(first.services[0]!.backends);
    expect(second.services[1]!.backends).not.toBe(first.services[1]!.backends);

    // A cached port repeats its problems (they are reported every run); gone Services leave the cache.
    const third = withCache(cache, [services[1]!], [sliceA, changedB]);
    expect(third.skipped).toEqual(second.skipped);
    expect(third.skipped.map((s) => s.reason)).toEqual(["InvalidAddress"]);
    expect([...cache.keys()]).toEqual(["default/b|http|tcp"]);
  });
});
