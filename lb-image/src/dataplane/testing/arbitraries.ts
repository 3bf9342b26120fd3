// fast-check generators of data-plane states, shared by the engines' property tests.
import fc from "fast-check";
import {
  FORWARDINGS,
  SCHEDULERS,
  serviceKey,
  type Backend,
  type Handover,
  type VirtualService,
} from "../model.ts";

// Small address and port spaces on purpose: collisions between current and desired are the
// interesting cases (same service, changed backends).
const vip = fc.integer({ min: 1, max: 6 }).map((n) => `10.1.1.${n}`);
const backendIp = fc.integer({ min: 1, max: 12 }).map((n) => `10.244.${n % 3}.${n}`);
const port = fc.constantFrom(80, 443, 8080);

export const arbitraryBackend: fc.Arbitrary<Backend> = fc.record({
  ip: backendIp,
  port,
  weight: fc.oneof(fc.constant(1), fc.constant(0), fc.integer({ min: 0, max: 100 })),
});

export const arbitraryService: fc.Arbitrary<VirtualService> = fc
  .record({
    vip,
    port,
    protocol: fc.constantFrom("tcp" as const, "udp" as const),
    scheduler: fc.constantFrom(...SCHEDULERS),
    forwarding: fc.constantFrom(...FORWARDINGS),
    backends: fc.uniqueArray(arbitraryBackend, { selector: (b) => `${b.ip}:${b.port}`, maxLength: 6 }),
    affinity: fc.option(fc.constant("clientIP" as const), { nil: undefined }),
  })
  .map(({ affinity, ...s }) => (affinity ? { ...s, affinity } : s))
  // DSR cannot remap ports: its backends listen on the service's port.
  .map((s) =>
    s.forwarding === "dsr"
      ? { ...s, backends: [...new Map(s.backends.map((b) => [b.ip, { ...b, port: s.port }])).values()] }
      : s,
  )
  .chain((s) =>
    s.forwarding === "dsr"
      ? fc.option(arbitraryHandover, { nil: undefined }).map((h) => (h ? { ...s, handover: h } : s))
      : fc.constant(s),
  );

/** Another platform's LB nodes (a sorted list, as desiredState gives) and which flows go there. */
const arbitraryHandover: fc.Arbitrary<Handover> = fc.record({
  to: fc
    .uniqueArray(fc.integer({ min: 11, max: 14 }), { minLength: 1, maxLength: 3 })
    .map((ns) => ns.map((n) => `192.168.100.${n}`).sort()),
  relay: fc.constantFrom("all" as const, "established" as const),
});

export const arbitraryState: fc.Arbitrary<VirtualService[]> = fc.uniqueArray(arbitraryService, {
  selector: serviceKey,
  maxLength: 8,
});
