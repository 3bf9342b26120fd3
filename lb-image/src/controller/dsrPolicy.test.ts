import type {
  V1LabelSelector,
  V1NetworkPolicy,
  V1NetworkPolicyIngressRule,
  V1NetworkPolicyPeer,
  V1Service,
} from "@kubernetes/client-node";
import fc from "fast-check";
import { policiesBlockingDsr, selects, tunnelRule, type LbPeers } from "./dsrPolicy.ts";

const LB: LbPeers = {
  namespace: "lb-system",
  podLabels: { app: "portable-lb-controller", "app.kubernetes.io/part-of": "portable-lb" },
  podSelector: { app: "portable-lb-controller" },
  podCidr: "10.244.0.0/16",
  tunnel: "vxlan",
};

const svc = (selector?: Record<string, string>, ns = "shop"): V1Service => ({
  metadata: { name: "web", namespace: ns },
  spec: { ...(selector && { selector }) },
});

const policy = (
  name: string,
  spec: {
    podSelector?: V1LabelSelector;
    policyTypes?: string[];
    ingress?: V1NetworkPolicyIngressRule[];
  },
  ns = "shop",
): V1NetworkPolicy => ({
  metadata: { name, namespace: ns },
  spec: { podSelector: spec.podSelector ?? {}, ...spec },
});

const fromLbNamespace = {
  namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "lb-system" } },
};
const UDP_4789 = { protocol: "UDP", port: 4789 };
const web = svc({ app: "web" });

describe("selects", () => {
  it("decides from complete labels, and says undefined where partial labels cannot tell", () => {
    const sel: V1LabelSelector = { matchLabels: { app: "web" } };
    expect(selects(sel, { app: "web" }, true)).toBe(true);
    expect(selects(sel, { app: "db" }, true)).toBe(false);
    expect(selects(sel, {}, true)).toBe(false);
    expect(selects(sel, {}, false)).toBeUndefined();
    const expr = (operator: string, values?: string[]): V1LabelSelector => ({
      matchExpressions: [{ key: "tier", operator, ...(values && { values }) }],
    });
    expect(selects(expr("In", ["a", "b"]), { tier: "b" }, false)).toBe(true);
    expect(selects(expr("In", ["a"]), { tier: "b" }, false)).toBe(false);
    expect(selects(expr("NotIn", ["a"]), { tier: "b" }, false)).toBe(true);
    expect(selects(expr("NotIn", ["a"]), {}, true)).toBe(true);
    expect(selects(expr("Exists"), {}, false)).toBeUndefined();
    expect(selects(expr("Exists"), {}, true)).toBe(false);
    expect(selects(expr("DoesNotExist"), { tier: "x" }, false)).toBe(false);
    // One certain mismatch outweighs unknowns.
    expect(selects({ matchLabels: { app: "db", other: "x" } }, { app: "web" }, false)).toBe(false);
  });

  it("the empty selector selects everything", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.string()), fc.boolean(), (labels, complete) => {
        expect(selects({}, labels, complete)).toBe(true);
      }),
    );
  });
});

describe("policiesBlockingDsr", () => {
  it("reports a policy that selects the backends and admits only TCP 80", () => {
    const p = policy("only-http", {
      podSelector: { matchLabels: { app: "web" } },
      ingress: [{ ports: [{ protocol: "TCP", port: 80 }] }],
    });
    expect(policiesBlockingDsr(web, [p], LB)).toEqual(["shop/only-http"]);
  });

  it("counts a deny-all ingress policy (empty podSelector, no rules), with or without policyTypes", () => {
    expect(policiesBlockingDsr(web, [policy("deny", { policyTypes: ["Ingress"] })], LB)).toEqual([
      "shop/deny",
    ]);
    // The API server fills in policyTypes; a policy read without them restricts ingress all the same.
    expect(policiesBlockingDsr(web, [policy("deny", {})], LB)).toEqual(["shop/deny"]);
  });

  it("ignores Egress-only policies, other namespaces' and those selecting other pods", () => {
    expect(
      policiesBlockingDsr(
        web,
        [
          policy("egress", { policyTypes: ["Egress"] }),
          policy("elsewhere", { policyTypes: ["Ingress"] }, "other"),
          policy("db", { podSelector: { matchLabels: { app: "db" } }, policyTypes: ["Ingress"] }),
        ],
        LB,
      ),
    ).toEqual([]);
  });

  it("counts a policy whose selector the Service's cannot decide (better a false warning)", () => {
    const p = policy("tiered", { podSelector: { matchLabels: { tier: "front" } }, policyTypes: ["Ingress"] });
    expect(policiesBlockingDsr(web, [p], LB)).toEqual(["shop/tiered"]);
    expect(policiesBlockingDsr(svc(undefined), [p], LB)).toEqual(["shop/tiered"]);
  });

  it("lets the tunnel through with the suggested rule, or a rule for all ports from the LB pods", () => {
    const deny = policy("deny", { policyTypes: ["Ingress"] });
    // The rule as a user writes it (`from`), in the client's model (`_from`) as the cache holds it.
    const { from, ports } = tunnelRule(LB);
    expect(from).toEqual([
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "lb-system" } },
        podSelector: { matchLabels: { app: "portable-lb-controller" } },
      },
    ]);
    const allow = policy("allow-dsr", { policyTypes: ["Ingress"], ingress: [{ _from: from, ports }] });
    expect(policiesBlockingDsr(web, [deny, allow], LB)).toEqual([]);
    const otherPort = policy("allow-4790", {
      ingress: [{ _from: from, ports: [{ protocol: "UDP", port: 4790 }] }],
    });
    expect(policiesBlockingDsr(web, [deny, otherPort], LB)).toEqual(["shop/allow-4790", "shop/deny"]);
    const allPorts = policy("from-lb", { ingress: [{ _from: [fromLbNamespace] }] });
    expect(policiesBlockingDsr(web, [allPorts], LB)).toEqual([]);
  });

  it("admits IPVS's IPIP tunnel only by a rule without ports (a policy cannot name IP protocol 4)", () => {
    const ipip: LbPeers = { ...LB, tunnel: "ipip" };
    const deny = policy("deny", { policyTypes: ["Ingress"] });
    const vxlanRule = tunnelRule(LB);
    const ipipRule = tunnelRule(ipip);
    expect(ipipRule).toEqual({ from: vxlanRule.from });
    const vxlanOnly = policy("allow-vxlan", { ingress: [{ _from: vxlanRule.from, ports: vxlanRule.ports }] });
    expect(policiesBlockingDsr(web, [deny, vxlanOnly], ipip)).toEqual(["shop/allow-vxlan", "shop/deny"]);
    expect(policiesBlockingDsr(web, [deny, vxlanOnly], LB)).toEqual([]);
    const allPorts = policy("from-lb", { ingress: [{ _from: ipipRule.from }] });
    expect(policiesBlockingDsr(web, [deny, allPorts], ipip)).toEqual([]);
  });

  it("requires the rule's port and its peer to admit the tunnel in the same rule", () => {
    const split = policy("split", {
      ingress: [{ _from: [fromLbNamespace], ports: [{ protocol: "TCP", port: 80 }] }, { ports: [] }],
    });
    // The second rule allows everything from anywhere: that is enough.
    expect(policiesBlockingDsr(web, [split], LB)).toEqual([]);
    const narrow = policy("narrow", {
      ingress: [
        { _from: [fromLbNamespace], ports: [{ protocol: "TCP", port: 80 }] },
        { _from: [{ podSelector: {} }], ports: [UDP_4789] },
      ],
    });
    // UDP 4789 only from the policy's own namespace's pods, the LB's only TCP 80.
    expect(policiesBlockingDsr(web, [narrow], LB)).toEqual(["shop/narrow"]);
  });

  it("matches ports by number or range, UDP only, never by name", () => {
    const with4789 = (port: object) => policy("p", { ingress: [{ ports: [port] }] });
    expect(policiesBlockingDsr(web, [with4789({ protocol: "UDP", port: 4000, endPort: 5000 })], LB)).toEqual(
      [],
    );
    expect(policiesBlockingDsr(web, [with4789({ protocol: "UDP" })], LB)).toEqual([]);
    expect(policiesBlockingDsr(web, [with4789({ port: 4789 })], LB)).toEqual(["shop/p"]);
    expect(policiesBlockingDsr(web, [with4789({ protocol: "UDP", port: 4790, endPort: 5000 })], LB)).toEqual([
      "shop/p",
    ]);
    expect(policiesBlockingDsr(web, [with4789({ protocol: "UDP", port: "vxlan" })], LB)).toEqual(["shop/p"]);
  });

  it("matches peers: the LB namespace and pod labels, or an address block holding the pod network", () => {
    const from = (peer: V1NetworkPolicyPeer) =>
      policy("p", { ingress: [{ _from: [peer], ports: [UDP_4789] }] });
    const blocked = (peer: V1NetworkPolicyPeer) => policiesBlockingDsr(web, [from(peer)], LB).length > 0;
    expect(blocked({ ...fromLbNamespace, podSelector: { matchLabels: LB.podSelector } })).toBe(false);
    expect(blocked({ ...fromLbNamespace, podSelector: { matchLabels: { app: "other" } } })).toBe(true);
    expect(blocked({ namespaceSelector: { matchLabels: { team: "net" } } })).toBe(true);
    expect(blocked({ namespaceSelector: {} })).toBe(false);
    // A podSelector alone means the policy's own namespace.
    expect(blocked({ podSelector: { matchLabels: LB.podSelector } })).toBe(true);
    expect(
      policiesBlockingDsr(
        svc({ app: "web" }, "lb-system"),
        [from({ podSelector: { matchLabels: LB.podSelector } })].map((p) => ({
          ...p,
          metadata: { ...p.metadata, namespace: "lb-system" },
        })),
        LB,
      ),
    ).toEqual([]);
    expect(blocked({ ipBlock: { cidr: "10.0.0.0/8" } })).toBe(false);
    expect(blocked({ ipBlock: { cidr: "10.244.1.0/24" } })).toBe(true);
    expect(blocked({ ipBlock: { cidr: "10.0.0.0/8", except: ["10.244.5.0/24"] } })).toBe(true);
    expect(blocked({ ipBlock: { cidr: "10.0.0.0/8", except: ["10.250.0.0/16"] } })).toBe(false);
  });

  it("never blocks without an Ingress policy in the namespace, nor with a rule open to all", () => {
    const selector = fc.record({
      matchLabels: fc.option(fc.dictionary(fc.constantFrom("app", "tier"), fc.constantFrom("web", "db")), {
        nil: undefined,
      }),
    });
    const anyPolicy = fc.record({
      podSelector: selector,
      policyTypes: fc.option(fc.subarray(["Ingress", "Egress"]), { nil: undefined }),
      ingress: fc.option(
        fc.array(
          fc.record({
            _from: fc.option(fc.array(fc.constant(fromLbNamespace), { maxLength: 1 }), { nil: undefined }),
            ports: fc.option(fc.array(fc.constant({ protocol: "TCP", port: 80 }), { maxLength: 1 }), {
              nil: undefined,
            }),
          }),
          { maxLength: 2 },
        ),
        { nil: undefined },
      ),
    });
    fc.assert(
      fc.property(
        fc.array(anyPolicy, { maxLength: 4 }),
        fc.dictionary(fc.constantFrom("app", "tier"), fc.constantFrom("web", "db")),
        (specs, labels) => {
          const service = svc(labels);
          const others = specs.map((spec, i) => policy(`p${i}`, spec, "other"));
          expect(policiesBlockingDsr(service, others, LB)).toEqual([]);
          // An empty `from` and empty ports admit everything: one such rule is enough.
          const mine = specs.map((spec, i) => policy(`p${i}`, spec));
          const open = policy("open", { podSelector: { matchLabels: labels }, ingress: [{}] });
          expect(policiesBlockingDsr(service, [...mine, open], LB)).toEqual([]);
          // Blocking names only policies of the Service's namespace, sorted.
          const blocking = policiesBlockingDsr(service, mine, LB);
          expect(blocking).toEqual([...blocking].sort());
          expect(blocking.every((n) => n.startsWith("shop/"))).toBe(true);
        },
      ),
    );
  });
});
