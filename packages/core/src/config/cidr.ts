// IPv4 prefix arithmetic for validation (ipaddr.js parses; we only compare ranges).
import ipaddr from "ipaddr.js";
import { z } from "zod";

export interface Ipv4Range {
  first: number;
  last: number;
}

function toNumber(addr: ipaddr.IPv4): number {
  return addr.toByteArray().reduce((acc, byte) => acc * 256 + byte, 0);
}

/** The 32-bit value of a dotted-quad address (what cidrRange counts in). */
export function ipv4ToNumber(ip: string): number {
  return toNumber(ipaddr.IPv4.parse(ip));
}

/** The address whose 32-bit value is `n` (the inverse of what cidrRange counts in). */
export function numberToIpv4(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/** A dotted-quad IPv4 address (no leading zeros, each part ≤ 255), for values from outside. */
export function isIpv4Address(s: unknown): s is string {
  return typeof s === "string" && ipaddr.IPv4.isValidFourPartDecimal(s);
}

export function cidrRange(cidr: string): Ipv4Range {
  const [addr, bits] = ipaddr.IPv4.parseCIDR(cidr);
  const size = 2 ** (32 - bits);
  const first = Math.floor(toNumber(addr) / size) * size;
  return { first, last: first + size - 1 };
}

/** True for a parseable IPv4 prefix. Cross-field checks use it: zod runs them even when a field failed. */
export function isIpv4Cidr(s: unknown): s is string {
  return typeof s === "string" && ipaddr.IPv4.isValidCIDR(s);
}

export function cidrsOverlap(a: string, b: string): boolean {
  const x = cidrRange(a);
  const y = cidrRange(b);
  return x.first <= y.last && y.first <= x.last;
}

export function cidrContains(cidr: string, ip: string): boolean {
  const r = cidrRange(cidr);
  const n = ipv4ToNumber(ip);
  return r.first <= n && n <= r.last;
}

/** Number of addresses in the prefix. */
export function cidrSize(cidr: string): number {
  const r = cidrRange(cidr);
  return r.last - r.first + 1;
}

/** An IPv4 prefix whose host bits are zero ("10.0.0.0/24", not "10.0.0.1/24"). */
export const ipv4Cidr = z
  .string()
  .refine((s) => ipaddr.IPv4.isValidCIDR(s), {
    error: (issue) =>
      ipaddr.IPv6.isValidCIDR(String(issue.input))
        ? "IPv6 is not supported yet; use an IPv4 prefix like 10.0.0.0/24"
        : "not an IPv4 prefix; write it like 10.0.0.0/24",
  })
  .refine(
    (s) =>
      !ipaddr.IPv4.isValidCIDR(s) || ipaddr.IPv4.networkAddressFromCIDR(s).toString() === s.split("/")[0],
    {
      error: (issue) => {
        const s = String(issue.input);
        return `host bits are set; write the network address ${ipaddr.IPv4.networkAddressFromCIDR(s).toString()}/${s.split("/")[1]}`;
      },
    },
  );

export const ipv4Address = z.ipv4({
  error: (issue) =>
    ipaddr.IPv6.isValid(String(issue.input))
      ? "IPv6 is not supported yet; use an IPv4 address like 10.0.0.1"
      : "not an IPv4 address; write it like 10.0.0.1",
});
