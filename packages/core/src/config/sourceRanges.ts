// Which client addresses may reach a Service's VIPs: spec.loadBalancerSourceRanges, else the legacy
// annotation, read as Kubernetes' own helper reads them (k8s.io/cloud-provider's
// GetLoadBalancerSourceRanges): the field when it has entries, else the annotation's comma-separated
// list; spaces around an entry ignored, host bits allowed. Our VIPs are IPv4, so an IPv6 range is
// valid but admits no one here.
import ipaddr from "ipaddr.js";
import { cidrRange, numberToIpv4, type Ipv4Range } from "./cidr.ts";

export const SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges";
export const SOURCE_RANGES_FIELD = "spec.loadBalancerSourceRanges";

export interface SourceRangesRead {
  /** Where they were read from; undefined when neither is set (every source is admitted). */
  from?: typeof SOURCE_RANGES_FIELD | `annotation ${typeof SOURCE_RANGES_ANNOTATION}`;
  /**
   * The IPv4 addresses admitted, merged and sorted (empty: none, e.g. only IPv6 ranges); undefined
   * when every address is (nothing set, or a range such as 0.0.0.0/0 covers all).
   */
  ranges?: Ipv4Range[];
  /** Entries that are not an IP range (CIDR); with any, `ranges` says nothing. */
  invalid: string[];
}

/** An IPv4 or IPv6 prefix ("10.0.0.0/8", host bits allowed), as Kubernetes accepts them. */
export function isSourceRange(entry: string): boolean {
  const s = entry.trim();
  return ipaddr.IPv4.isValidCIDR(s) || ipaddr.IPv6.isValidCIDR(s);
}

export function readSourceRanges(
  field: string[] | undefined,
  annotation: string | undefined,
): SourceRangesRead {
  const fromField = (field ?? []).length > 0;
  const entries = fromField ? field! : (annotation ?? "").trim() === "" ? [] : annotation!.split(",");
  if (entries.length === 0) return { invalid: [] };
  const from = fromField ? SOURCE_RANGES_FIELD : (`annotation ${SOURCE_RANGES_ANNOTATION}` as const);
  const invalid = entries.map((e) => e.trim()).filter((e) => !isSourceRange(e));
  if (invalid.length > 0) return { from, invalid };
  const v4 = entries
    .map((e) => e.trim())
    .filter((e) => ipaddr.IPv4.isValidCIDR(e))
    .map(cidrRange)
    .sort((a, b) => a.first - b.first);
  const merged: Ipv4Range[] = [];
  for (const r of v4) {
    const last = merged.at(-1);
    if (last && r.first <= last.last + 1) last.last = Math.max(last.last, r.last);
    else merged.push({ ...r });
  }
  const everyone = merged.length === 1 && merged[0]!.first === 0 && merged[0]!.last === 2 ** 32 - 1;
  return everyone ? { from, invalid: [] } : { from, ranges: merged, invalid: [] };
}

/** A range as nft writes an interval: "10.0.0.0-10.255.255.255". */
export function formatIpv4Range(r: Ipv4Range): string {
  return `${numberToIpv4(r.first)}-${numberToIpv4(r.last)}`;
}
