// Inputs for the BGP renderer tests: the fixed examples behind the golden files, and fast-check
// generators of arbitrary valid inputs (the bounds mirror config/bgpSettings.ts).
import fc from "fast-check";
import type {
  BfdTimers,
  BgpTimers,
  RouteReflectorConfigInput,
  SpeakerConfigInput,
  UpstreamRouterConfigInput,
} from "./types.ts";

const bfd: BfdTimers = { minRxMs: 300, minTxMs: 300, multiplier: 3 };
const timers: BgpTimers = { holdTimeS: 9, keepaliveS: 3 };
/** Quote-free but otherwise awkward: a backslash, a quote, comment starters, a dollar. */
const password = String.raw`s3cr\t'#!$x`;

/** One reflector, one speaker range, one router: the paper's lab (Fig. 5). */
export const reflectorInput: RouteReflectorConfigInput = {
  routerId: "10.0.0.109",
  asn: 65021,
  speakerRanges: ["172.16.0.0/16"],
  vipPrefixes: ["10.1.1.0/24"],
  upstreamRouters: ["10.0.0.110"],
  bfd,
  timers,
  gracefulRestartS: 120,
};

/** A member of a redundant pair (which needs no session to the other) with MD5, two routers and two speaker ranges. */
export const reflectorPairInput: RouteReflectorConfigInput = {
  routerId: "10.0.0.108",
  asn: 4200000001,
  speakerRanges: ["172.16.0.0/16", "172.17.0.0/16"],
  speakerLocalAddress: "172.16.3.0",
  vipPrefixes: ["10.1.1.0/24", "192.0.2.0/28"],
  upstreamRouters: ["10.0.0.110", "10.0.0.111"],
  bfd: { minRxMs: 100, minTxMs: 200, multiplier: 5 },
  timers: { holdTimeS: 30, keepaliveS: 10 },
  gracefulRestartS: 300,
  password,
};

export const routerInput: UpstreamRouterConfigInput = {
  asn: 65021,
  routerId: "10.0.0.110",
  routeReflectors: ["10.0.0.109"],
  maximumPaths: 16,
  bfd,
  timers,
};

export const routerPairInput: UpstreamRouterConfigInput = {
  asn: 4200000001,
  routerId: "10.0.0.110",
  routeReflectors: ["10.0.0.108", "10.0.0.109"],
  maximumPaths: 64,
  bfd: { minRxMs: 100, minTxMs: 200, multiplier: 5 },
  timers: { holdTimeS: 30, keepaliveS: 10 },
  password,
};

/** An LB pod on node 10.0.0.11 announcing two VIPs to one reflector's overlay address. */
export const speakerInput: SpeakerConfigInput = {
  routerId: "172.16.1.10",
  asn: 65021,
  routeReflectors: ["172.16.0.5"],
  nextHop: "10.0.0.11",
  vips: ["10.1.1.11", "10.1.1.10"],
  bfd,
  timers,
  gracefulRestartS: 120,
};

/** Draining (nothing announced), two reflectors, MD5. */
export const speakerDrainingInput: SpeakerConfigInput = {
  ...speakerInput,
  asn: 4200000001,
  routeReflectors: ["172.16.0.5", "172.16.3.0"],
  vips: [],
  password,
};

/** Two reflectors, exporting to the first only (the second's BFD session is not Up yet). */
export const speakerExportGatedInput: SpeakerConfigInput = {
  ...speakerInput,
  routeReflectors: ["172.16.0.5", "172.16.3.0"],
  exportTo: ["172.16.0.5"],
};

const octet = fc.integer({ min: 0, max: 255 });
/** Unicast-looking first octet: BIRD and FRR reject 0.x, loopback and multicast neighbors. */
const firstOctet = fc.integer({ min: 1, max: 223 }).filter((n) => n !== 127);

const ipv4 = fc
  .tuple(firstOctet, octet, octet, fc.integer({ min: 1, max: 254 }))
  .map((parts) => parts.join("."));

const ipv4Cidr = fc
  .tuple(firstOctet, octet, octet, fc.integer({ min: 8, max: 30 }))
  .map(([a, b, c, length]) => {
    const address = ((a << 24) | (b << 16) | (c << 8)) >>> 0;
    const network = (address & (~0 << (32 - length))) >>> 0;
    return `${[24, 16, 8, 0].map((shift) => (network >>> shift) & 255).join(".")}/${length}`;
  });

/** Printable ASCII but space and `"` (what both BIRD and FRR can carry), up to the kernel's 80. */
export const quotablePassword = fc.string({
  unit: fc
    .integer({ min: 0x21, max: 0x7e })
    .filter((c) => c !== 0x22)
    .map((c) => String.fromCharCode(c)),
  minLength: 1,
  maxLength: 80,
});

const arbitraryPassword = fc.option(quotablePassword, { nil: undefined });

const asn = fc.integer({ min: 1, max: 4294967294 }).filter((n) => n !== 23456 && n !== 65535);

const arbitraryBfd: fc.Arbitrary<BfdTimers> = fc.record({
  minRxMs: fc.integer({ min: 10, max: 10_000 }),
  minTxMs: fc.integer({ min: 10, max: 10_000 }),
  multiplier: fc.integer({ min: 2, max: 255 }),
});

const arbitraryTimers: fc.Arbitrary<BgpTimers> = fc
  .integer({ min: 1, max: 21845 })
  .chain((keepaliveS) =>
    fc
      .integer({ min: Math.max(3, 3 * keepaliveS), max: 65535 })
      .map((holdTimeS) => ({ holdTimeS, keepaliveS })),
  );

/** What every session input has besides addresses. */
const sessionFields = { asn, bfd: arbitraryBfd, timers: arbitraryTimers, password: arbitraryPassword };

/** `count` distinct addresses, so no session points at the router's own address. */
const distinctAddresses = (count: number) => fc.uniqueArray(ipv4, { minLength: count, maxLength: count });

export const arbitraryReflectorInput: fc.Arbitrary<RouteReflectorConfigInput> = fc
  .record({
    routers: fc.integer({ min: 1, max: 3 }),
    separateSpeakerAddress: fc.boolean(),
  })
  .chain(({ routers, separateSpeakerAddress }) =>
    fc
      .record({
        ...sessionFields,
        addresses: distinctAddresses(2 + routers),
        speakerRanges: fc.uniqueArray(ipv4Cidr, { minLength: 1, maxLength: 3 }),
        vipPrefixes: fc.uniqueArray(ipv4Cidr, { minLength: 1, maxLength: 3 }),
        gracefulRestartS: fc.integer({ min: 0, max: 4095 }),
      })
      .map(({ addresses, password, ...rest }) => ({
        ...rest,
        routerId: addresses[0]!,
        ...(separateSpeakerAddress && { speakerLocalAddress: addresses[1]! }),
        upstreamRouters: addresses.slice(2),
        ...(password !== undefined && { password }),
      })),
  );

/** `maxPaths`: 255 for BIRD (its merge limit), 256 for this FRR build (--enable-multipath=256). */
export function arbitraryRouterInput(maxPaths: number): fc.Arbitrary<UpstreamRouterConfigInput> {
  return fc.integer({ min: 1, max: 3 }).chain((reflectors) =>
    fc
      .record({
        ...sessionFields,
        addresses: distinctAddresses(1 + reflectors),
        maximumPaths: fc.integer({ min: 1, max: maxPaths }),
      })
      .map(({ addresses, password, ...rest }) => ({
        ...rest,
        routerId: addresses[0]!,
        routeReflectors: addresses.slice(1),
        ...(password !== undefined && { password }),
      })),
  );
}

export const arbitrarySpeakerInput: fc.Arbitrary<SpeakerConfigInput> = fc
  .integer({ min: 1, max: 3 })
  .chain((reflectors) =>
    fc
      .record({
        ...sessionFields,
        addresses: distinctAddresses(2 + reflectors),
        vips: fc.uniqueArray(ipv4, { maxLength: 20 }),
        gracefulRestartS: fc.integer({ min: 0, max: 4095 }),
        // Which reflectors get the VIPs; undefined: all.
        exported: fc.option(fc.array(fc.boolean(), { minLength: reflectors, maxLength: reflectors }), {
          nil: undefined,
        }),
      })
      .map(({ addresses, password, exported, ...rest }) => ({
        ...rest,
        routerId: addresses[0]!,
        nextHop: addresses[1]!,
        routeReflectors: addresses.slice(2),
        ...(exported && { exportTo: addresses.slice(2).filter((_, i) => exported[i]) }),
        ...(password !== undefined && { password }),
      })),
  );
